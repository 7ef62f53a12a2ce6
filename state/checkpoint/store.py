"""Completed-checkpoint stores (Flink's CompletedCheckpointStore).

Adding a checkpoint is the atomic step of completion. Retain-N keeps the
``max_retained`` newest checkpoints (by id); older ones are *subsumed*:
marked, in the same write that stores the new one, so the new checkpoint is
always stored no later than the old one is dropped. Savepoints are never
subsumed. Subsumed entries stay listed (``awaiting_release``) until whoever
releases their files calls ``mark_released``, so a crash between the commit
and the release loses nothing. Released entries are history: the newest
:data:`RELEASED_HISTORY` of them stay listed, older ones are deleted in the
same write, so the store holds a bounded number of rows however long the
pipeline runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from fsspec.core import url_to_fs
import pyarrow as pa

from epochal.state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from epochal.state.errors import CheckpointNotFound, DuplicateCheckpointError, InvalidCheckpointRequest
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from epochal.state.delta.log import DeltaLog
from epochal.state.delta.objectstore import delta_rs_options
from epochal.state.session import started_session
from epochal.state.delta.paths import to_spark


RELEASED_HISTORY = 10


def released_beyond_history(entries: Iterable[CompletedCheckpoint], newly_released: Iterable[int]) -> list[int]:
    """Ids of released entries older than the newest :data:`RELEASED_HISTORY` once ``newly_released`` are."""
    new = set(newly_released)
    released = sorted({e.checkpoint_id for e in entries if e.status is RetentionStatus.RELEASED} | new)
    return released[:-RELEASED_HISTORY] if len(released) > RELEASED_HISTORY else []


@runtime_checkable
class CompletedCheckpointStore(Protocol):
    """Where completed checkpoints and savepoints are committed and found again."""

    max_retained: int

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        """Commit ``checkpoint`` (atomically) and return the checkpoints it subsumed."""
        ...

    def latest(self, kind: CheckpointKind | None = None) -> CompletedCheckpoint | None:
        """The retained entry with the highest id (of ``kind``, if given)."""
        ...

    def get(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        """The entry with this id, whatever its status."""
        ...

    def all(self) -> list[CompletedCheckpoint]:
        """Every retained checkpoint and savepoint, by ascending id."""
        ...

    def known_ids(self) -> list[int]:
        """The id of every entry, whatever its status (released ones too), ascending."""
        ...

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        """Drop a retained entry on request (e.g. a savepoint); its files then await release."""
        ...

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        """Subsumed or removed entries whose files were not released yet, by ascending id."""
        ...

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        """Record that the exclusive files of these entries were released."""
        ...


def plan_add(
    retained: Iterable[CompletedCheckpoint], new: CompletedCheckpoint, max_retained: int
) -> tuple[CompletedCheckpoint, list[CompletedCheckpoint]]:
    """Retain-N: the entry to store for ``new`` and the retained checkpoints it subsumes."""
    if new.is_savepoint:
        return new, []
    candidates = sorted([c for c in retained if not c.is_savepoint and c.retained] + [new], key=lambda c: c.checkpoint_id)
    dropped = candidates[: max(0, len(candidates) - max_retained)]
    subsumed = [c.with_status(RetentionStatus.SUBSUMED) for c in dropped]
    stored = next((c for c in subsumed if c.checkpoint_id == new.checkpoint_id), new)
    return stored, subsumed


def newest(entries: Iterable[CompletedCheckpoint], kind: CheckpointKind | None) -> CompletedCheckpoint | None:
    """The retained entry with the highest id, optionally of one kind."""
    matching = [e for e in entries if e.retained and (kind is None or e.kind is kind)]
    return max(matching, key=lambda e: e.checkpoint_id, default=None)


def _check_new(checkpoint: CompletedCheckpoint, existing: CompletedCheckpoint | None) -> None:
    if existing is not None:
        raise DuplicateCheckpointError(
            f"Checkpoint {checkpoint.checkpoint_id} is already in the completed-checkpoint store.",
            action="checkpoint ids are never reused: check that one id counter serves this pipeline.",
            checkpoint_id=checkpoint.checkpoint_id,
        )
    if checkpoint.status is not RetentionStatus.RETAINED:
        raise InvalidCheckpointRequest(
            f"Only a retained checkpoint can be added, not a {checkpoint.status.value} one.",
            checkpoint_id=checkpoint.checkpoint_id,
        )


def _not_found(checkpoint_id: int, what: str = "entry") -> CheckpointNotFound:
    return CheckpointNotFound(
        f"Checkpoint {checkpoint_id} is not a retained {what} of the completed-checkpoint store.",
        action="list checkpoints with `epochal checkpoints list`.",
        pointer=str(checkpoint_id),
        checkpoint_id=checkpoint_id,
    )


class InMemoryCompletedCheckpointStore:
    """A store for one process (tests); same contract as the Delta store."""

    def __init__(self, max_retained: int = 1) -> None:
        if max_retained < 1:
            raise InvalidCheckpointRequest("max_retained must be at least 1.", max_retained=max_retained)
        self.max_retained = max_retained
        self._entries: dict[int, CompletedCheckpoint] = {}

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        _check_new(checkpoint, self._entries.get(checkpoint.checkpoint_id))
        stored, subsumed = plan_add(self._entries.values(), checkpoint, self.max_retained)
        self._entries[stored.checkpoint_id] = stored  # stored first ...
        for entry in subsumed:  # ... then dropped
            self._entries[entry.checkpoint_id] = entry
        return subsumed

    def latest(self, kind: CheckpointKind | None = None) -> CompletedCheckpoint | None:
        return newest(self._entries.values(), kind)

    def get(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        return self._entries.get(checkpoint_id)

    def all(self) -> list[CompletedCheckpoint]:
        return sorted((e for e in self._entries.values() if e.retained), key=lambda e: e.checkpoint_id)

    def known_ids(self) -> list[int]:
        return sorted(int(i) for i in self._entries)

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        entry = self._entries.get(checkpoint_id)
        if entry is None or not entry.retained:
            raise _not_found(checkpoint_id)
        self._entries[checkpoint_id] = entry.with_status(RetentionStatus.REMOVED)
        return self._entries[checkpoint_id]

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        return sorted((e for e in self._entries.values() if e.status.awaiting_release), key=lambda e: e.checkpoint_id)

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        ids = list(checkpoint_ids)
        for checkpoint_id in ids:
            self._entries[checkpoint_id] = self._entries[checkpoint_id].with_status(RetentionStatus.RELEASED)
        for checkpoint_id in released_beyond_history(self._entries.values(), ids):
            del self._entries[checkpoint_id]


# ---------------------------------------------------------------------- Delta
_COLUMNS = (
    ("checkpoint_id", "BIGINT"),
    ("epoch", "BIGINT"),
    ("kind", "STRING"),
    ("status", "STRING"),
    ("retained", "BOOLEAN"),
    ("metadata_path", "STRING"),
    ("created_at", "TIMESTAMP"),
    ("metadata_json", "STRING"),
)
_SCHEMA = ", ".join(f"{name} {sql_type}" for name, sql_type in _COLUMNS)
_ARROW_TYPES = {"BIGINT": pa.int64(), "STRING": pa.string(), "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us", tz="UTC")}


def _arrow_schema(columns: tuple[tuple[str, str], ...]) -> pa.Schema:
    return pa.schema([(name, _ARROW_TYPES[sql_type]) for name, sql_type in columns])


_ARROW = _arrow_schema(_COLUMNS)  # Spark's TIMESTAMP is Delta's timestamp: UTC instants
_SOURCE = _arrow_schema(_COLUMNS + (("op", "STRING"),))
CHECKPOINT_INTERVAL = 10  # as Spark's Delta writes them (delta.checkpointInterval's default)
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_READ_COLUMNS = ("metadata_json", "metadata_path", "status")
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


class DeltaCompletedCheckpointStore:
    """One Delta table, one row per completed checkpoint or savepoint; every write is one MERGE commit.

    Rows are few and small (a handful of retained checkpoints, and the last
    released ones): a read replays the table's log and reads its parquet files
    on the driver with fsspec and pyarrow, with no Spark job and no JVM
    (``epochal checkpoints list`` and ``inspect`` start none), falling back to
    Spark only for a version with deletion vectors (never written by this
    store). The rows of the table's latest version are cached, keyed by that
    version (found by listing ``_delta_log``), so reads after this store's own
    writes cost nothing; a write by anyone else changes the version and the
    next read goes to the table again.

    Writes are MERGEs by delta-rs, in process, with no Spark job either: a
    Spark MERGE of these few rows costs a Spark Delta commit (0.6-0.8 s of
    driver work and a dozen jobs), twice an epoch with a checkpoint; delta-rs
    commits it in milliseconds, with the same optimistic concurrency (a
    commit file created only if absent: a rename on a file system, a
    conditional PUT on S3). Each commit carries the label of the epoch step
    that made it as its ``userMetadata``, as Spark's commits do.
    """

    def __init__(
        self, spark: Any, table_url: str, max_retained: int = 1, storage_options: dict[str, Any] | None = None
    ) -> None:
        if max_retained < 1:
            raise InvalidCheckpointRequest("max_retained must be at least 1.", max_retained=max_retained)
        self.max_retained = max_retained
        self._spark = spark
        self._url = table_url
        self._path = to_spark(table_url)
        self._storage_options = dict(storage_options or {})
        self._log_fs, self._log_dir = url_to_fs(table_url.rstrip("/") + "/_delta_log", **self._storage_options)
        self._rs_options = delta_rs_options(table_url, os.environ)
        self._snapshot: tuple[int, dict[int, CompletedCheckpoint]] | None = None

    @property
    def table_url(self) -> str:
        return self._url

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        version, current = self._read()
        _check_new(checkpoint, current.get(checkpoint.checkpoint_id))
        stored, subsumed = plan_add(current.values(), checkpoint, self.max_retained)
        self._write(version, current, inserted=[stored], updated=subsumed)
        return subsumed

    def latest(self, kind: CheckpointKind | None = None) -> CompletedCheckpoint | None:
        return newest(self._read()[1].values(), kind)

    def get(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        return self._read()[1].get(checkpoint_id)

    def all(self) -> list[CompletedCheckpoint]:
        return sorted((e for e in self._read()[1].values() if e.retained), key=lambda e: e.checkpoint_id)

    def known_ids(self) -> list[int]:
        return sorted(int(i) for i in self._read()[1])

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        version, current = self._read()
        entry = current.get(checkpoint_id)
        if entry is None or not entry.retained:
            raise _not_found(checkpoint_id)
        removed = entry.with_status(RetentionStatus.REMOVED)
        self._write(version, current, inserted=[], updated=[removed])
        return removed

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        entries = self._read()[1].values()
        return sorted((e for e in entries if e.status.awaiting_release), key=lambda e: e.checkpoint_id)

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        ids = sorted({int(i) for i in checkpoint_ids})
        if not ids:
            return
        version, current = self._read()
        missing = [i for i in ids if i not in current]
        if missing:
            raise _not_found(missing[0])
        forgotten = released_beyond_history(current.values(), ids)
        released = [current[i].with_status(RetentionStatus.RELEASED) for i in ids if i not in forgotten]
        self._write(version, current, inserted=[], updated=released, deleted=forgotten)

    # ----------------------------------------------------------- internals
    def _read(self) -> tuple[int | None, dict[int, CompletedCheckpoint]]:
        """The latest table version and every row of it (None, {} if there is no table yet)."""
        version = self._log_version()
        if version is None:
            return None, {}
        if self._snapshot is None or self._snapshot[0] != version:
            rows = self._rows_from_log(version)
            if rows is None:
                frame = self._spark.read.format("delta").option("versionAsOf", version).load(self._path)
                rows = frame.select(*_READ_COLUMNS).collect()
            self._snapshot = (version, {e.checkpoint_id: e for e in map(_from_row, rows)})
        return version, self._snapshot[1]

    def _rows_from_log(self, version: int) -> list[dict[str, Any]] | None:
        """The rows of ``version``, read without Spark; None when a file has a deletion vector (Spark reads it)."""
        import pyarrow.parquet as pq

        log = DeltaLog(self._url, self._storage_options)
        snapshot = log.snapshot(version)
        if any(f.dv_path is not None for f in snapshot.files):
            return None
        rows: list[dict[str, Any]] = []
        for f in snapshot.files:
            path = f.path if "://" in f.path else f"{log.root}/{f.path}"
            with log.fs.open(path, "rb") as fh:
                # On this thread only: pyarrow's background readers can abort the process at exit (apache/arrow#34314).
                # One file, not a dataset: pyarrow.dataset would import pandas (0.2 s of every process's start).
                parquet = pq.ParquetFile(fh, pre_buffer=False)
                rows += parquet.read(columns=list(_READ_COLUMNS), use_threads=False).to_pylist()
        return rows

    def _write(
        self, version: int | None, current: dict[int, CompletedCheckpoint], *,
        inserted: list[CompletedCheckpoint], updated: list[CompletedCheckpoint], deleted: Iterable[int] = (),
    ) -> None:
        """One MERGE commit; the cache moves to the new version only if no one else committed meanwhile."""
        base = self._create_if_missing() if version is None else version
        gone = set(deleted)
        self._snapshot = None
        self._merge(base, inserted=inserted, updated=updated, deleted=[current[i] for i in gone])
        if self._log_version() == base + 1:
            entries = {**current, **{e.checkpoint_id: e for e in inserted + updated}}
            self._snapshot = (base + 1, {i: e for i, e in entries.items() if i not in gone})

    def _log_version(self) -> int | None:
        """The newest committed version, from the names in ``_delta_log`` (no Spark job)."""
        try:
            names = self._log_fs.ls(self._log_dir, detail=False)
        except FileNotFoundError:
            return None
        versions = [int(m.group(1)) for m in (_COMMIT_FILE.match(str(n).rstrip("/").rsplit("/", 1)[-1]) for n in names) if m]
        return max(versions, default=None)

    def _create_if_missing(self) -> int:
        """Create the empty table (version 0) unless it exists; return the current version."""
        from deltalake import write_deltalake
        from deltalake.exceptions import DeltaError

        try:
            write_deltalake(self._url, _ARROW.empty_table(), mode="error", storage_options=self._rs_options,
                            commit_properties=self._commit_properties())
        except (DeltaError, OSError):  # created meanwhile by someone else: theirs is the table
            if self._log_version() is None:
                raise
        return self._log_version() or 0

    def _merge(
        self, base: int, *, inserted: list[CompletedCheckpoint], updated: list[CompletedCheckpoint],
        deleted: list[CompletedCheckpoint] = (),
    ) -> None:
        """One Delta commit on top of ``base``: insert new rows, update the status of existing ones, delete
        forgotten ones. delta-rs writes it (no Spark job); a commit by anyone else since ``base`` is checked
        for conflicts as Delta's optimistic concurrency does, and a Delta checkpoint every
        :data:`CHECKPOINT_INTERVAL` versions keeps the log short for every reader."""
        from deltalake import DeltaTable, PostCommitHookProperties

        rows = [_to_row(e, "insert") for e in inserted] + [_to_row(e, "update") for e in updated]
        rows += [_to_row(e, "delete") for e in deleted]
        source = pa.Table.from_pylist([dict(zip(_SOURCE.names, row)) for row in rows], schema=_SOURCE)
        table = DeltaTable(self._url, version=base, storage_options=self._rs_options)
        (
            table.merge(source, "t.checkpoint_id = s.checkpoint_id", source_alias="s", target_alias="t",
                        commit_properties=self._commit_properties(),
                        post_commithook_properties=PostCommitHookProperties(create_checkpoint=False))
            .when_matched_delete(predicate="s.op = 'delete'")
            .when_matched_update(updates={"status": "s.status", "retained": "s.retained"}, predicate="s.op = 'update'")
            .when_not_matched_insert(updates={n: f"s.{n}" for n in _ARROW.names}, predicate="s.op = 'insert'")
            .execute()
        )
        version = table.version()
        if version % CHECKPOINT_INTERVAL == 0:
            table.create_checkpoint()

    def _commit_properties(self) -> Any:
        """The commit's ``userMetadata``: the label Spark's Delta commits of this moment carry (an epoch's step)."""
        from deltalake import CommitProperties

        spark = started_session(self._spark)  # a lazy session not started yet is not started for a label
        label = spark.conf.get(USER_METADATA, None) if spark is not None else None
        return CommitProperties(custom_metadata={"userMetadata": label} if label else None)


def _to_row(entry: CompletedCheckpoint, op: str) -> tuple[Any, ...]:
    meta = entry.metadata
    return (
        meta.checkpoint_id, meta.epoch, meta.kind.value, entry.status.value, entry.retained,
        entry.metadata_path, meta.completed_at, meta.model_dump_json(), op,
    )


def _from_row(row: Mapping[str, Any] | Any) -> CompletedCheckpoint:
    metadata = CheckpointMetadata.model_validate_json(row["metadata_json"])
    return CompletedCheckpoint(metadata=metadata, metadata_path=row["metadata_path"], status=RetentionStatus(row["status"]))

