"""A small upsert sink's MERGE, done as one rewrite of the table and committed as the MERGE it is.

Delta's MERGE of an epoch's rows into a table of a few hundred rows costs six Spark jobs and about a second
and a half (materializing its source, rebuilding the table's snapshot to list its files, finding the files
with matches, writing them), whatever the table's size; the table's files are all touched anyway. Below
``spark.sink_rewrite_below_mb`` an upsert sink is rewritten instead, as a small keyed state table is
(:mod:`epochal.state.backends.keyed_writes`): one full outer join of the table and the epoch's rows, one Spark
job, written through Delta's transaction API (:mod:`epochal.state.delta.overwrite`), whose commit is a
``MERGE`` with the MERGE's predicate, clauses and metrics (rows inserted, updated, deleted and copied, files
added and removed), as delta-rs commits its own MERGE, which rewrites the files it touches too. The rows
are those Delta's MERGE leaves: a key whose values did not change keeps its row, a deleted key
(``delete_column``) goes, a new key is inserted unless it is a deletion.

Tables a rewrite would show differently to their readers are MERGEd as before: a change data feed (a MERGE
records the changed rows) or row tracking (a MERGE keeps an updated row's id), partitions, or columns other
than the sink's (generated or identity columns, or the same columns in another order: a table whose columns differ
otherwise is refused before the write, see :mod:`epochal.pipeline.sink_schema`). An epoch whose rows name a key twice fails with an error naming the sink before anything
is committed (Delta's MERGE fails so when the key is in the table, and inserts both rows when it is not).
"""

from __future__ import annotations

import time
import uuid
from functools import reduce
from typing import Mapping

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.pipeline.errors import PipelineError
from epochal.state.backends.values import normal_column, normal_sql, quoted
from epochal.state.delta import io as delta_io
from epochal.state.delta import overwrite as delta_overwrite
from epochal.state.delta.log import VersionSnapshot

#: Upsert sinks of at most this many live bytes are rewritten instead of MERGEd; the configuration's
#: ``spark.sink_rewrite_below_mb`` sets it for a deployment.
REWRITE_BELOW_BYTES = 4 * 1024 * 1024
#: Table properties under which a rewrite would read differently from Delta's MERGE.
_MERGE_ONLY = ("delta.enableChangeDataFeed", "delta.enableRowTracking")
#: How long the commit waits for the rewrite's row counts (Spark delivers them on its listener bus).
METRICS_WAIT_S = 120.0
_IN_T, _IN_S, _ROWS = "__epochal_in_target", "__epochal_in_source", "__epochal_rows"
#: A MERGE clause: its condition (SQL, None: always) and its action (``update``, ``delete``, ``insert``).
Clause = tuple[str | None, str]


def merge_clauses(
    keys: list[str], values: list[str], delete: str | None, types: Mapping[str, T.DataType]
) -> tuple[str, list[Clause], list[Clause]]:
    """The upsert as a MERGE, in SQL over target ``t`` and source ``s``: its condition, its matched clauses and its
    not-matched clauses, each (condition or None, action), in order. Delta's MERGE runs them; a rewrite records
    them in its commit. A key whose values did not change is not updated; a deletion is never inserted. A value
    column holding a map (``types``, the sink's column types) is compared by its entries: Spark has no ``<=>``
    for maps."""

    def same(c: str) -> str:
        return f"{normal_sql(f't.{quoted(c)}', types[c])} <=> {normal_sql(f's.{quoted(c)}', types[c])}"

    condition = " AND ".join(f"t.{quoted(k)} <=> s.{quoted(k)}" for k in keys)
    changed = " OR ".join(f"NOT ({same(c)})" for c in values) or "false"
    if not delete:
        return condition, [(changed, "update")], [(None, "insert")]
    keep = f"NOT s.{quoted(delete)}"
    return condition, [(f"s.{quoted(delete)}", "delete"), (f"{keep} AND ({changed})", "update")], [(keep, "insert")]


def rewritable(snapshot: VersionSnapshot | None, schema: T.StructType, below_bytes: int) -> VersionSnapshot | None:
    """``snapshot`` (a version of the table, from its Delta log: no Spark job) when an upsert may rewrite it (small,
    and nothing a rewrite would show differently), else None (MERGE it)."""
    if below_bytes <= 0 or snapshot is None:
        return None
    if snapshot.bytes_total > below_bytes or (snapshot.metadata or {}).get("partitionColumns"):
        return None
    if any(str(snapshot.configuration.get(name, "false")).lower() == "true" for name in _MERGE_ONLY):
        return None
    return snapshot if _columns(snapshot.schema) == _columns(schema) else None


def upsert(spark, path: str, snapshot: VersionSnapshot, rows: DataFrame, *, sink: str, keys: list[str], delete: str | None) -> int:
    """MERGE ``rows`` (the sink's columns, and ``delete`` when given) into the table at ``snapshot``'s version by
    rewriting it; returns the committed version."""
    columns = [c for c in rows.columns if c != delete]
    values = [c for c in columns if c not in keys]
    types = {f.name: f.dataType for f in rows.schema.fields}
    observation = Observation(f"epochal_sink_{uuid.uuid4().hex}")  # a name of its own: one observation per write

    def build(version: VersionSnapshot) -> DataFrame:
        target = delta_io.read_version(spark, path, version.version, snapshot=version).withColumn(_IN_T, F.lit(True))
        others = [c for c in rows.columns if c not in keys]
        source = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias(_ROWS), *[F.first(c).alias(c) for c in others])
        source = source.withColumn(_IN_S, F.lit(True))
        on = reduce(lambda a, b: a & b, [_col("t", k).eqNullSafe(_col("s", k)) for k in keys])
        joined = target.alias("t").join(source.alias("s"), on, "full_outer")
        in_t, in_s = _col("t", _IN_T).isNotNull(), _col("s", _IN_S).isNotNull()
        deleted = in_s & F.coalesce(_col("s", delete), F.lit(False)) if delete else F.lit(False)
        changed = reduce(lambda a, b: a | b, [~_same(c, types[c]) for c in values], F.lit(False))
        updated, removed, inserted = in_t & in_s & ~deleted & changed, in_t & deleted, ~in_t & in_s & ~deleted
        keep = (in_t & ~removed) | inserted
        flagged = joined.select(
            *[F.when(updated | inserted, _col("s", c)).otherwise(_col("t", c)).alias(c) for c in columns],
            keep.alias("keep"), updated.alias("updated"), removed.alias("removed"), inserted.alias("inserted"),
            F.coalesce(_col("s", _ROWS), F.lit(0)).alias("rows"),
        )
        observed = flagged.observe(
            observation,
            *[_sum(F.col(flag)).alias(flag) for flag in ("keep", "updated", "removed", "inserted")],
            F.sum("rows").alias("source"), _sum(F.col("rows") > 1).alias("repeated"),
        )
        return observed.where("keep").select(*columns)

    def commit_as(txn, added, version: VersionSnapshot):
        counts = _counts(observation, sink)
        if counts["repeated"]:
            raise PipelineError(
                f"upsert sink {sink!r} ({path}): {counts['repeated']} key(s) of the epoch's rows come more than once "
                f"(keys {', '.join(keys)}); an upsert sink takes one row per key an epoch. Nothing was committed."
            )
        written = counts["inserted"] + counts["updated"]
        metrics = {
            "numSourceRows": counts["source"], "numTargetRowsInserted": counts["inserted"],
            "numTargetRowsUpdated": counts["updated"], "numTargetRowsDeleted": counts["removed"],
            "numTargetRowsCopied": counts["keep"] - written, "numOutputRows": counts["keep"],
            "numTargetFilesAdded": int(added.size()), "numTargetFilesRemoved": len(version.files),
        }
        condition, matched, not_matched = merge_clauses(keys, values, delete, types)
        return delta_overwrite.merge_operation(
            spark, txn, condition=condition, matched=matched, not_matched=not_matched, metrics=metrics
        )

    return delta_overwrite.overwrite(spark, path, build, snapshot=snapshot, commit_as=commit_as)


def _counts(observation: Observation, sink: str) -> dict[str, int]:
    """The rewrite's row counts, once Spark's listener bus has delivered them (bounded: a missing delivery fails)."""
    future = observation._jo.future()  # noqa: SLF001 - PySpark's get() would wait without a bound
    deadline = time.monotonic() + METRICS_WAIT_S
    while not future.isCompleted():
        if time.monotonic() > deadline:
            raise PipelineError(f"upsert sink {sink!r}: the rewrite's row counts did not arrive within {METRICS_WAIT_S:.0f} s; nothing was committed")
        time.sleep(0.005)
    return {name: int(value or 0) for name, value in observation.get.items()}


def _sum(flag: Column) -> Column:
    return F.coalesce(F.sum(flag.cast("long")), F.lit(0))


def _col(side: str, name: str) -> Column:
    return F.col(f"{side}.{quoted(name)}")


def _same(name: str, dtype: T.DataType) -> Column:
    """Target and source agree on column ``name`` (null-safe; maps by their entries)."""
    return normal_column(_col("t", name), dtype).eqNullSafe(normal_column(_col("s", name), dtype))


def _columns(schema: T.StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]
