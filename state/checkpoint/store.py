"""Completed-checkpoint stores (Flink's CompletedCheckpointStore).

Adding a checkpoint is the atomic step of completion. Retain-N keeps the
``max_retained`` newest checkpoints (by id); older ones are *subsumed*:
marked, in the same write that stores the new one, so the new checkpoint is
always stored no later than the old one is dropped. Savepoints are never
subsumed. Subsumed entries stay listed (``awaiting_release``) until whoever
releases their files calls ``mark_released``, so a crash between the commit
and the release loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from state.checkpoint.errors import CheckpointNotFound, DuplicateCheckpointError, InvalidCheckpointRequest
from state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from state.checkpoint.storage import to_spark_path


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

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        entry = self._entries.get(checkpoint_id)
        if entry is None or not entry.retained:
            raise _not_found(checkpoint_id)
        self._entries[checkpoint_id] = entry.with_status(RetentionStatus.REMOVED)
        return self._entries[checkpoint_id]

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        return sorted((e for e in self._entries.values() if e.status.awaiting_release), key=lambda e: e.checkpoint_id)

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        for checkpoint_id in checkpoint_ids:
            self._entries[checkpoint_id] = self._entries[checkpoint_id].with_status(RetentionStatus.RELEASED)


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


class DeltaCompletedCheckpointStore:
    """One Delta table, one row per completed checkpoint or savepoint; ``add`` is one MERGE commit.

    Rows are few and small: reads collect them to the driver.
    """

    def __init__(self, spark: Any, table_url: str, max_retained: int = 1) -> None:
        if max_retained < 1:
            raise InvalidCheckpointRequest("max_retained must be at least 1.", max_retained=max_retained)
        self.max_retained = max_retained
        self._spark = spark
        self._url = table_url
        self._path = to_spark_path(table_url)

    @property
    def table_url(self) -> str:
        return self._url

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        current = self._rows(f"status = 'retained' OR checkpoint_id = {int(checkpoint.checkpoint_id)}")
        _check_new(checkpoint, current.get(checkpoint.checkpoint_id))
        stored, subsumed = plan_add(current.values(), checkpoint, self.max_retained)
        self._merge(inserted=[stored], updated=subsumed)
        return subsumed

    def latest(self, kind: CheckpointKind | None = None) -> CompletedCheckpoint | None:
        where = "status = 'retained'" + ("" if kind is None else f" AND kind = '{kind.value}'")
        return newest(self._rows(where).values(), kind)

    def get(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        return self._rows(f"checkpoint_id = {int(checkpoint_id)}").get(checkpoint_id)

    def all(self) -> list[CompletedCheckpoint]:
        return sorted(self._rows("status = 'retained'").values(), key=lambda e: e.checkpoint_id)

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        entry = self.get(checkpoint_id)
        if entry is None or not entry.retained:
            raise _not_found(checkpoint_id)
        removed = entry.with_status(RetentionStatus.REMOVED)
        self._merge(inserted=[], updated=[removed])
        return removed

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        statuses = ", ".join(f"'{s.value}'" for s in (RetentionStatus.SUBSUMED, RetentionStatus.REMOVED))
        return sorted(self._rows(f"status IN ({statuses})").values(), key=lambda e: e.checkpoint_id)

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        ids = sorted({int(i) for i in checkpoint_ids})
        if not ids:
            return
        rows = self._rows(f"checkpoint_id IN ({', '.join(map(str, ids))})")
        missing = [i for i in ids if i not in rows]
        if missing:
            raise _not_found(missing[0])
        self._merge(inserted=[], updated=[rows[i].with_status(RetentionStatus.RELEASED) for i in ids])

    # ----------------------------------------------------------- internals
    def _rows(self, where: str) -> dict[int, CompletedCheckpoint]:
        if not self._exists():
            return {}
        frame = self._spark.read.format("delta").load(self._path).where(where)
        rows = frame.select("metadata_json", "metadata_path", "status").collect()
        return {e.checkpoint_id: e for e in map(_from_row, rows)}

    def _exists(self) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self._spark, self._path))

    def _table(self) -> Any:
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(self._spark).location(self._path)
        for name, sql_type in _COLUMNS:
            builder = builder.addColumn(name, sql_type)
        return builder.execute()

    def _merge(self, *, inserted: list[CompletedCheckpoint], updated: list[CompletedCheckpoint]) -> None:
        """One Delta commit: insert new rows and update the status of existing ones."""
        source = self._spark.createDataFrame(
            [_to_row(e, "insert") for e in inserted] + [_to_row(e, "update") for e in updated],
            schema=", ".join(f"{n} {t}" for n, t in _COLUMNS) + ", op STRING",
        )
        (
            self._table().alias("t")
            .merge(source.alias("s"), "t.checkpoint_id = s.checkpoint_id")
            .whenMatchedUpdate(condition="s.op = 'update'", set={"status": "s.status", "retained": "s.retained"})
            .whenNotMatchedInsert(condition="s.op = 'insert'", values={n: f"s.{n}" for n, _ in _COLUMNS})
            .execute()
        )


def _to_row(entry: CompletedCheckpoint, op: str) -> tuple[Any, ...]:
    meta = entry.metadata
    return (
        meta.checkpoint_id, meta.epoch, meta.kind.value, entry.status.value, entry.retained,
        entry.metadata_path, meta.completed_at, meta.model_dump_json(), op,
    )


def _from_row(row: Mapping[str, Any] | Any) -> CompletedCheckpoint:
    metadata = CheckpointMetadata.model_validate_json(row["metadata_json"])
    return CompletedCheckpoint(metadata=metadata, metadata_path=row["metadata_path"], status=RetentionStatus(row["status"]))

