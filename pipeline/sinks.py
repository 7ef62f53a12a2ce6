"""Exactly-once Delta sinks.

- APPEND sinks carry an ``epoch`` column; writing epoch ``e`` replaces the rows
  of epoch ``e`` in one Delta commit (``replaceWhere epoch = e``), so a replayed
  epoch never duplicates output, whatever instant the crash happened at. When the
  Delta log's file statistics show no row of ``e`` (the usual case: not a replay),
  the commit is a plain append, which needs no scan of the table.
- UPSERT sinks receive full values (not increments) for the keys that changed
  and ``MERGE`` them on their natural keys: writing the same epoch twice is a
  no-op. A sink of at most ``spark.sink_rewrite_below_mb`` is rewritten in one
  transaction committed as that MERGE (:mod:`epochal.pipeline.sink_rewrite`).

- An UPSERT sink whose spec names a ``delete_column`` takes deletions too (Flink's
  ``RowKind.DELETE``, an upsert-kafka tombstone): an input row with that column true
  deletes its key; the column itself is not stored.

Every checkpoint and savepoint records each sink's Delta version (its
:class:`SinkPosition`, acknowledged by the sink's task after its write, as a Flink sink
pre-commits into the checkpoint). Restoring one brings each sink back to that version
with one Delta ``RESTORE`` commit, whatever the sink's mode and whether or not its
stage has a ``view()``. Only when the version cannot be restored (a checkpoint from
before positions were recorded, a savepoint of another deployment's tables, files
removed by ``VACUUM``) is the sink rewound by content: APPEND sinks drop rows of epochs
after ``k``; UPSERT sinks are rebuilt from the stage's ``view()`` (empty without one).
After restoring any checkpoint or savepoint and running on, the sinks equal a straight run.
"""

from __future__ import annotations

import logging
import posixpath

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.pipeline import sink_rewrite
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.sink_schema import refuse_drift
from epochal.pipeline.stage import SinkMode, SinkSpec
from epochal.state.checkpoint.metadata import SinkPosition
from epochal.state.delta import io as delta_io
from epochal.state.delta.log import VersionSnapshot
from epochal.state.delta.paths import same_location
from epochal.state.handles import StateHandle, StateKind
from epochal.state.delta.tables import create_table, snapshot_table
from epochal.state.fence import Fence, no_fence
from epochal.state.frames import empty_frame

EPOCH_COLUMN = "epoch"

log = logging.getLogger("epochal.sinks")


class DeltaSink:
    def __init__(
        self, spark: SparkSession, warehouse: str, spec: SinkSpec, fence: Fence = no_fence, *,
        rewrite_below_bytes: int = sink_rewrite.REWRITE_BELOW_BYTES,
    ) -> None:
        self.spark = spark
        self.spec = spec
        self.path = posixpath.join(warehouse.rstrip("/"), spec.name)
        #: Called before every write of the table (see :mod:`epochal.state.fence`).
        self.fence = fence
        #: An upsert sink of at most this many live bytes is rewritten instead of MERGEd (0: always MERGE).
        self.rewrite_below_bytes = rewrite_below_bytes

    @property
    def table_schema(self) -> T.StructType:
        fields = list(self.spec.schema.fields)
        if self.spec.mode is SinkMode.APPEND:
            fields.append(T.StructField(EPOCH_COLUMN, T.LongType(), False))
        return T.StructType(fields)

    @property
    def _mode(self) -> dict:
        """What :func:`refuse_drift` names a changed mode by."""
        return {"epoch_column": EPOCH_COLUMN, "append": self.spec.mode is SinkMode.APPEND}

    def ensure(self) -> None:
        if not delta_io.is_delta_table(self.path):
            # Retention is the user's: Delta's defaults (log 30 days, removed files 7 days before VACUUM may
            # delete them); a restore to a sink version whose files are gone rewinds the sink by content.
            props = {
                **delta_io.PORTABLE_TABLE_PROPERTIES,  # every Delta reader opens a sink
                "epochal.sinkMode": self.spec.mode.value,
            }
            create_table(self.spark, self.path, self.table_schema, props)

    def check_table(self, epoch: int, partition: str | None) -> None:
        """Before a run's first epoch: refuse a table whose columns are no longer the spec's (the SinkSpec changed
        since the table was written), before any stage runs or state changes (:func:`refuse_drift`, up front).
        The table's latest version, read from its Delta log without Spark; no table yet: nothing to compare."""
        from epochal.state.delta.log import DeltaLog

        log = DeltaLog(self.path)
        latest = log.latest_version() if log.exists() else None
        if latest is not None:
            refuse_drift(log.snapshot(latest).schema, self.table_schema, sink=self.spec.name, path=self.path,
                         epoch=epoch, partition=partition, up_front=True, **self._mode)

    def check_input(self, df: DataFrame, *, deletions: bool = True) -> None:
        """Raise if ``df`` lacks a column the sink writes (or, with ``deletions``, its delete column): known from
        its schema, no Spark job."""
        delete = self.spec.delete_column if deletions else None
        wanted = [f.name for f in self.spec.schema.fields] + ([delete] if delete else [])
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise ValueError(f"sink {self.spec.name!r}: input lacks column(s) {missing}; got {df.columns}")

    def _conform(self, df: DataFrame, *, deletions: bool = False) -> DataFrame:
        """The sink's columns, cast to its schema (and the delete column, as a boolean, when ``deletions``)."""
        self.check_input(df, deletions=deletions)
        delete = self.spec.delete_column if deletions else None
        columns = [self._readable(F.col(f.name).cast(f.dataType), f) for f in self.spec.schema.fields]
        if delete:
            columns.append(F.coalesce(F.col(delete).cast("boolean"), F.lit(False)).alias(delete))
        return df.select(*columns)

    def _readable(self, column, field: T.StructField):
        """``column`` as ``field`` names it; a string column fails the write at a value that is not valid UTF-8.

        Spark keeps a string's bytes as it read them (a ``_corrupt_record``, a text file's line), and Parquet takes
        them; delta-rs and every Arrow-based reader then refuse to open the whole table ("encountered non UTF-8
        data"). The check runs in the write's own job, no extra one."""
        if not isinstance(field.dataType, T.StringType):
            return column.alias(field.name)
        problem = (f"sink {self.spec.name!r}, column {field.name!r}: a value is not valid UTF-8 (delta-rs and "
                   "other Delta readers would refuse the whole table); make it valid in the stage that writes it: "
                   "F.make_valid_utf8(column), or the line's bytes decoded as ISO-8859-1 as the clickstream example "
                   "quarantines them")
        return F.when(F.is_valid_utf8(column) | column.isNull(), column).otherwise(F.raise_error(F.lit(problem))).alias(field.name)

    def write(self, df: DataFrame, epoch: int, *, partition: str | None = None) -> int | None:
        """Write one epoch's output (of ``partition``, for errors), idempotently; return the rows it wrote (see
        :meth:`_rows_written`). A table whose columns are not the spec's is refused first (:class:`SinkSchemaError`):
        its schema is that of the version the write starts from, read from the Delta log without Spark (the version
        an append, or an upsert's rewrite, reads anyway; this process reads only the commits since its last read)."""
        from epochal.state.delta.log import DeltaLog

        self.fence(f"write sink {self.spec.name} (epoch {epoch})")
        self.ensure()
        log = DeltaLog(self.path)
        before = log.latest_version()
        snapshot = None if before is None else log.snapshot(before)
        if snapshot is not None:
            refuse_drift(snapshot.schema, self.table_schema, sink=self.spec.name, path=self.path, epoch=epoch,
                         partition=partition, **self._mode)
        self._write(self._conform(df, deletions=True), epoch, snapshot)
        return self._rows_written(before)

    def _rows_written(self, before: int | None) -> int | None:
        """Rows the last write added or changed, from its commit's metrics (no Spark job).

        An append sink: the epoch's rows. An upsert sink: the rows inserted, updated or
        deleted (keys whose full value did not change are not rewritten). 0 when nothing was
        committed; None when the commit carries no metrics.
        """
        from epochal.state.delta.log import DeltaLog

        log = DeltaLog(self.path)
        version = log.latest_version()
        if version is None or version == before:
            return 0
        metrics = log.operation_metrics(version)
        keys = ("numOutputRows",) if self.spec.mode is SinkMode.APPEND else ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
        if not all(k in metrics for k in keys):
            return None
        return sum(int(metrics[k]) for k in keys)

    def _write(self, rows: DataFrame, epoch: int, snapshot: VersionSnapshot | None) -> None:
        if self.spec.mode is SinkMode.APPEND:
            writer = rows.withColumn(EPOCH_COLUMN, F.lit(epoch).cast("long")).write.format("delta")
            if _holds_epoch(snapshot, epoch):
                writer = writer.mode("overwrite").option("replaceWhere", f"{EPOCH_COLUMN} = {int(epoch)}")
            else:  # nothing to replace: a plain append skips the DELETE's scan (a Spark job and its planning)
                writer = writer.mode("append")
            writer.save(self.path)
        else:
            self._upsert(rows, snapshot)

    def _upsert(self, rows: DataFrame, snapshot: VersionSnapshot | None) -> None:
        """MERGE ``rows`` on the sink's keys (``snapshot``: the table as :meth:`write` found it)."""
        from delta.tables import DeltaTable

        keys, delete = list(self.spec.keys), self.spec.delete_column
        snapshot = sink_rewrite.rewritable(snapshot, self.table_schema, self.rewrite_below_bytes)
        if snapshot is not None:
            sink_rewrite.upsert(self.spark, self.path, snapshot, rows, sink=self.spec.name, keys=keys, delete=delete)
            return
        columns = [f.name for f in self.spec.schema.fields]
        types = {f.name: f.dataType for f in self.spec.schema.fields}
        condition, matched, not_matched = sink_rewrite.merge_clauses(keys, [c for c in columns if c not in keys], delete, types)
        assign = {sink_rewrite.quoted(c): f"s.{sink_rewrite.quoted(c)}" for c in columns}
        merge = DeltaTable.forPath(self.spark, self.path).alias("t").merge(rows.alias("s"), condition)
        for when, action in matched:
            merge = merge.whenMatchedDelete(condition=when) if action == "delete" else merge.whenMatchedUpdate(condition=when, set=assign)
        for when, _ in not_matched:
            merge = merge.whenNotMatchedInsert(condition=when, values=assign)
        merge.execute()

    def position(self) -> SinkPosition:
        """The table's current version, for a checkpoint's record (read from the Delta log: no Spark job)."""
        from epochal.state.delta.log import DeltaLog

        version = DeltaLog(self.path).latest_version() if delta_io.is_delta_table(self.path) else None
        return SinkPosition(sink=self.spec.name, table_path=self.path, version=version, mode=self.spec.mode.value)

    def restore_version(self, position: SinkPosition | None) -> bool:
        """Bring the table back to ``position``'s version in one ``RESTORE`` commit; False when it cannot be
        (no position, another table, the version's files gone), and the caller rewinds by content instead."""
        from epochal.state.delta.log import DeltaLog
        from epochal.state.delta.restore import restore_to_version

        if position is None:
            return False
        if not same_location(position.table_path, self.path):
            log.warning("sink %s: the snapshot recorded another table, %s (a savepoint of another deployment), not %s; "
                        "rewinding it by content instead", self.spec.name, position.table_path, self.path)
            return False
        if not delta_io.is_delta_table(self.path):
            return False
        if position.version is None:  # the table was created after the checkpoint: it held nothing then
            return False
        if DeltaLog(self.path).latest_version() == position.version:
            return True
        self.fence(f"restore sink {self.spec.name} to version {position.version}")
        try:
            # A column the user added since (the refusal of a widened SinkSpec says ALTER TABLE ... ADD COLUMNS) stays.
            restore_to_version(self.spark, self.path, position.version, keep_added_columns=True)
        except Exception as exc:  # noqa: BLE001 - Delta raises several JVM errors (vacuumed files, log cleaned up)
            log.warning("sink %s: cannot restore %s to version %s (%s); rewinding it by content instead",
                        self.spec.name, self.path, position.version, str(exc).splitlines()[0][:300])
            return False
        return True

    def rewind(self, last_epoch: int | None, view: DataFrame | None = None) -> None:
        """Make the sink what it was at the end of ``last_epoch`` (None: before the first epoch), by content."""
        self.fence(f"rewind sink {self.spec.name}")
        self.ensure()
        if self.spec.mode is SinkMode.APPEND:
            from delta.tables import DeltaTable

            # A SQL string, not a Column: a restore that needs Spark only here starts it in forPath (a Column built
            # before it had no JVM to build on: AssertionError, probe 15's restore past a sink added later).
            cond = "true" if last_epoch is None else f"`{EPOCH_COLUMN}` > {int(last_epoch)}"
            DeltaTable.forPath(self.spark, self.path).delete(cond)
            return
        content = self._conform(view) if view is not None else empty_frame(self.spark, self.spec.schema)
        content.write.format("delta").mode("overwrite").save(self.path)

    def snapshot(self) -> StateHandle:
        self.ensure()
        return snapshot_table(
            self.spark, self.path, stage=self.spec.name, state="sink", kind=StateKind.OPERATOR,
            state_type=f"sink:{self.spec.mode.value}", max_parallelism=None, parallelism=None,
        )

    def read(self) -> DataFrame:
        return self.spark.read.format("delta").load(self.path)

    def rows_from_log(self) -> int | None:
        """Live rows of the table's latest version, from its Delta log's statistics (no Spark job).

        0 when the table does not exist; None when a file carries no statistics.
        """
        from epochal.state.delta.log import DeltaLog

        log = DeltaLog(self.path)
        version = log.latest_version()
        return 0 if version is None else log.snapshot(version).rows


def refuse_written_sinks(sinks: dict[str, DeltaSink], checkpoint_storage: str) -> None:
    """Fail when sinks hold rows although the checkpoint storage holds no run position and no checkpoint.

    The checkpoint storage was deleted, or the config points at another one: starting from
    empty state would write wrong results on top of the old ones.
    """
    written = {name: rows for name, sink in sinks.items() if (rows := sink.rows_from_log()) != 0}
    if written:
        details = ", ".join(f"{name} ({sinks[name].path}, {'?' if rows is None else rows} rows)" for name, rows in written.items())
        raise PipelineError(
            f"the checkpoint storage {checkpoint_storage} holds no run position and no checkpoint, but sinks already "
            f"hold output: {details}. Running would start from empty state and write wrong results on top of them. "
            "Point `checkpoints.dir` at the deployment's checkpoint storage, restore a savepoint "
            "(`epochal restore --savepoint PATH`), or delete the sink tables to start over."
        )


def forward_gap(sinks: dict[str, DeltaSink], position: int | None, restored_epoch: int | None) -> str | None:
    """What append sinks lack after a restore to an epoch ahead of the position they were at (None: no gap).

    Rows of the epochs in between were dropped when the sinks were last rewound (a
    restore or backfill to an older epoch); the restored state does not bring them back.
    A new deployment (no position) starts its append sinks at the restored epoch, as
    a Flink job started from a savepoint does.
    """
    appends = [name for name, sink in sinks.items() if sink.spec.mode is SinkMode.APPEND]
    if position is None or restored_epoch is None or restored_epoch <= position or not appends:
        return None
    return (
        f"restored epoch {restored_epoch} is ahead of the sinks (at epoch {position}): append sinks "
        f"{', '.join(appends)} hold no rows of epochs {position + 1}..{restored_epoch}, dropped when they were "
        f"rewound. To have them, restore a checkpoint or savepoint at or before epoch {position} and run on."
    )


def _holds_epoch(snapshot: VersionSnapshot | None, epoch: int) -> bool:
    """Whether an append sink's table (at ``snapshot``) may hold rows of ``epoch`` (a replay): False only when
    every live file's statistics (the Delta log, read without Spark) put its ``epoch`` column outside it."""
    if snapshot is None:
        return True
    for live in snapshot.files:
        low = (live.min_values or {}).get(EPOCH_COLUMN)
        high = (live.max_values or {}).get(EPOCH_COLUMN)
        if low is None or high is None or int(low) <= epoch <= int(high):
            return True
    return False
