"""How one keyed-state write lands in its Delta table: a ``MERGE``, or one overwrite of a small table.

A write is given as MERGE clauses (:class:`WriteClauses`): the source rows ``s`` and
expressions over the target ``t`` and ``s``. :func:`merge` runs them as Delta's MERGE;
:func:`rewrite` overwrites the whole table with the rows that MERGE would leave (a full
outer join of the table and the source, one Spark job). A MERGE costs about 18 Spark
jobs (materializing its source, finding the files it touches, writing rows and then
deletion vectors) whatever the table's size, which is most of a small epoch; above
:data:`REWRITE_BELOW_BYTES` a MERGE is chosen all the same, so that an epoch writes bytes
in proportion to the keys it changed, not to the state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from epochal.state.delta import io as delta_io
from epochal.state.delta import overwrite as delta_overwrite
from epochal.state.delta.log import DeltaLog, VersionSnapshot
from epochal.state.errors import StateSchemaError

KEY_COLUMNS = ("key_group", "key", "namespace")
_ROW_COLUMNS = ("key_group", "key", "namespace", "expires_at", "updated_epoch")  # taken from ``s`` as they are
_IN_TARGET, _IN_SOURCE = "__epochal_in_target", "__epochal_in_source"
#: Tables of at most this many live bytes are rewritten instead of MERGEd; the
#: configuration's ``spark.state_rewrite_below_mb`` sets it for a deployment.
REWRITE_BELOW_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class WriteClauses:
    """One state write as MERGE clauses: the source rows ``s`` and expressions over ``t`` and ``s``."""

    source: DataFrame
    matched: Column  # the new value of a matched key
    inserted: Column  # the value of a key the table lacks
    delete: Column  # matched: remove the key
    update: Column  # matched and not deleted: write the new value (else keep the row as it is)
    insert: Column  # not matched: insert
    expired: Column  # the target row has expired
    expire_unmatched: bool  # remove the expired rows the source does not name


def rewrite_snapshot(path: str, below_bytes: int) -> VersionSnapshot | None:
    """The table's latest version when its live bytes are at most ``below_bytes`` (rewrite it), else None
    (MERGE it); read from the Delta log, no Spark job. :func:`rewrite` reads the version's files from it."""
    log = DeltaLog(path)
    version = log.latest_version()
    if version is None:
        raise FileNotFoundError(f"no Delta table at {path}")
    snapshot = log.snapshot(version)
    return snapshot if snapshot.bytes_total <= below_bytes else None


def merge(spark, path: str, clauses: WriteClauses, *, expire_unmatched: bool) -> None:
    """Delta's MERGE of ``clauses`` (``expire_unmatched``: delete the expired rows the source does not name)."""
    from delta.tables import DeltaTable

    taken = {c: F.col(f"s.{c}") for c in _ROW_COLUMNS}
    builder = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(clauses.source.alias("s"), " AND ".join(f"t.{c} = s.{c}" for c in KEY_COLUMNS))
        .whenMatchedDelete(condition=clauses.delete)
        .whenMatchedUpdate(condition=clauses.update, set={**taken, "value": clauses.matched})
        .whenNotMatchedInsert(condition=clauses.insert, values={**taken, "value": clauses.inserted})
    )
    if expire_unmatched:
        builder = builder.whenNotMatchedBySourceDelete(condition=clauses.expired)
    builder.execute()


def rewrite(spark, path: str, snapshot: VersionSnapshot, schema: T.StructType, clauses: WriteClauses) -> None:
    """Overwrite the table (read at ``snapshot``'s version) with what the MERGE of ``clauses`` would leave: one
    Delta transaction whose removes are the replayed version's files (:mod:`epochal.state.delta.overwrite`).

    Per key: a target row alone stays (unless expired and ``expire_unmatched``); a source
    row alone is inserted when ``insert`` holds; a matched pair is dropped when ``delete``
    holds, else updated when ``update`` holds, else left as it was. A condition that is
    null counts as false, as in a MERGE. The source must hold at most one row per key.
    """
    delta_overwrite.overwrite(spark, path, lambda version: _rewritten(spark, path, version, schema, clauses), snapshot=snapshot)


def _rewritten(spark, path: str, snapshot: VersionSnapshot, schema: T.StructType, clauses: WriteClauses) -> DataFrame:
    """The rows the MERGE of ``clauses`` would leave in the table read at ``snapshot``."""
    target = delta_io.read_version(spark, path, snapshot.version, snapshot=snapshot).withColumn(_IN_TARGET, F.lit(True))
    source = clauses.source.withColumn(_IN_SOURCE, F.lit(True))
    on = [F.col(f"t.{c}") == F.col(f"s.{c}") for c in KEY_COLUMNS]
    joined = target.alias("t").join(source.alias("s"), on[0] & on[1] & on[2], "full_outer")
    in_t = F.col(f"t.{_IN_TARGET}").isNotNull()
    in_s = F.col(f"s.{_IN_SOURCE}").isNotNull()
    both, source_only = in_t & in_s, ~in_t & in_s

    def holds(condition: Column) -> Column:
        return F.coalesce(condition, F.lit(False))

    updated = both & holds(clauses.update)
    keep = (
        F.when(both, ~holds(clauses.delete))
        .when(source_only, holds(clauses.insert))
        .otherwise(~holds(clauses.expired) if clauses.expire_unmatched else F.lit(True))
    )

    def pick(column: str, from_update: Column, from_insert: Column) -> Column:
        return F.when(updated, from_update).when(source_only, from_insert).otherwise(F.col(f"t.{column}")).alias(column)

    columns = [
        pick("value", clauses.matched, clauses.inserted) if f.name == "value" else pick(f.name, F.col(f"s.{f.name}"), F.col(f"s.{f.name}"))
        for f in schema.fields
    ]
    return joined.where(keep).select(*columns)


def refuse_duplicate_keys(df: DataFrame, duplicate_message: str, delete_column: str) -> DataFrame:
    """``df`` that fails, when evaluated, if it holds several rows for one key and namespace: a window count evaluated
    with the rows (Spark's ``raise_error``), folded into ``delete_column``, which the write reads, so that the
    optimizer cannot prune it away. Rows of a null key are not "several values": the table's NOT NULL key column
    refuses them, with the message that says so (:func:`refused_rows`)."""
    count = F.count(F.lit(1)).over(Window.partitionBy("key", "namespace"))
    message = F.concat(F.lit(duplicate_message + " (key "), _quoted(F.col("key")),
                       F.lit(", namespace "), _quoted(F.col("namespace")), F.lit(")"))
    several = (count > 1) & F.col("key").isNotNull()
    guarded = F.coalesce(F.when(several, F.raise_error(message)).cast("boolean"), F.col(delete_column))
    return df.withColumn(delete_column, guarded)


def _quoted(col: Column) -> Column:
    """``'text'`` of a key or namespace for error messages (``null`` when null)."""
    return F.coalesce(F.concat(F.lit("'"), col.cast("string"), F.lit("'")), F.lit("null"))


def refused_rows(text: str, where: str, duplicate_message: str, state: str) -> StateSchemaError | None:
    """The error to raise for a write of ``state`` (``where``: "writing state <stage>/<name> at epoch <n>") that
    failed with ``text``, when the rows were refused: a null key (the table's ``NOT NULL`` key column), or several
    rows for one key (``duplicate_message``, ours, or Delta's MERGE error); None for any other failure."""
    if "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" in text and re.search(r"NOT NULL constraint violated for column: key\b", text):
        return StateSchemaError(
            f"{where}: a row has a null key (keyed state needs a key in every row; the write was refused, the state "
            "is unchanged)",
            action="drop the rows whose key is null before writing state (or send them to a quarantine sink)", state=state,
        )
    ours = re.search(re.escape(duplicate_message) + r" \(key .*?, namespace .*?\)", text)
    if ours or "MULTIPLE_SOURCE_ROW" in text or "multiple source rows" in text.lower():
        return StateSchemaError(ours.group(0) if ours else duplicate_message,
                                action="give at most one row per key and namespace to update()", state=state)
    return None
