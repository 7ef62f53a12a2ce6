"""Checkpoint statistics (Flink's CheckpointStatsTracker), kept for a bounded history.

One :class:`CheckpointStats` record per finished checkpoint: durations, ack
latency per stage, state rows and bytes, bytes written, and why it failed.
Records are appended to a :class:`StatsHistory` that keeps the last
``max_entries``; the JSON-lines history lives in checkpoint storage so a
later process (the CLI, Dagster) can read it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from enum import Enum
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from epochal.state.errors import CheckpointError, CheckpointNotFound
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from epochal.state.checkpoint.pending import PendingCheckpoint
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.delta.checkpoints import json_lines

log = logging.getLogger(__name__)


class StatsStatus(str, Enum):
    COMPLETED = "completed"
    FAILED = "failed"


class CheckpointStats(BaseModel):
    """What one checkpoint cost and how it ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int
    epoch: int
    kind: CheckpointKind
    status: StatsStatus
    triggered_at: AwareDatetime
    finished_at: AwareDatetime
    duration_s: float = Field(ge=0)
    tasks: int = Field(ge=0, description="stages and sinks that had to acknowledge")
    acknowledged: int = Field(ge=0)
    ack_latency_s: dict[str, float] = Field(default_factory=dict, description="seconds from trigger, by task")
    state_rows: int = 0
    state_bytes: int = 0
    bytes_written: int = 0
    failure_reason: CheckpointFailureReason | None = None
    failure_detail: str = ""

    @classmethod
    def completed(cls, pending: PendingCheckpoint, metadata: CheckpointMetadata) -> CheckpointStats:
        return cls(
            checkpoint_id=metadata.checkpoint_id, epoch=metadata.epoch, kind=metadata.kind,
            status=StatsStatus.COMPLETED, triggered_at=metadata.triggered_at, finished_at=metadata.completed_at,
            duration_s=metadata.duration_s, tasks=len(pending.spec.tasks), acknowledged=len(metadata.acks),
            ack_latency_s={a.task: a.latency_s for a in metadata.acks}, state_rows=metadata.state_rows,
            state_bytes=metadata.state_bytes, bytes_written=metadata.bytes_written,
        )

    @classmethod
    def failed(cls, pending: PendingCheckpoint, failure: CheckpointFailure) -> CheckpointStats:
        spec, acks = pending.spec, pending.acks
        handles = [h for a in acks for h in a.handles]
        return cls(
            checkpoint_id=spec.checkpoint_id, epoch=spec.epoch, kind=spec.kind, status=StatsStatus.FAILED,
            triggered_at=spec.triggered_at, finished_at=failure.at,
            duration_s=max(0.0, (failure.at - spec.triggered_at).total_seconds()), tasks=len(spec.tasks),
            acknowledged=len(acks),
            ack_latency_s={a.task: max(0.0, (a.acknowledged_at - spec.triggered_at).total_seconds()) for a in acks},
            state_rows=sum(h.rows for h in handles), state_bytes=sum(h.bytes_total for h in handles),
            bytes_written=sum(h.bytes_added for h in handles),
            failure_reason=failure.reason, failure_detail=failure.detail,
        )


class StatsHistory(Protocol):
    """Durable, bounded list of stats records, oldest first."""

    def load(self) -> list[CheckpointStats]: ...

    def save(self, entries: list[CheckpointStats]) -> None: ...


class InMemoryStatsHistory:
    def __init__(self) -> None:
        self._entries: list[CheckpointStats] = []

    def load(self) -> list[CheckpointStats]:
        return list(self._entries)

    def save(self, entries: list[CheckpointStats]) -> None:
        self._entries = list(entries)


class JsonLinesStatsHistory:
    """A JSON-lines file in checkpoint storage, rewritten atomically on each save."""

    def __init__(self, storage: CheckpointStorage, path: str | None = None) -> None:
        self._storage = storage
        self._path = path or storage.stats_path

    def load(self) -> list[CheckpointStats]:
        if not self._storage.exists(self._path):
            return []
        lines = json_lines(self._storage.read(self._path).decode("utf-8"))
        return [entry for entry in map(_parse_line, lines) if entry is not None]

    def save(self, entries: list[CheckpointStats]) -> None:
        body = "".join(e.model_dump_json() + "\n" for e in entries)
        self._storage.write_atomic(self._path, body.encode("utf-8"))


def _parse_line(line: str) -> CheckpointStats | None:
    if not line.strip():
        return None
    try:
        return CheckpointStats.model_validate(json.loads(line))
    except (ValueError, ValidationError):
        log.warning("skipping an unreadable checkpoint stats line: %.120s", line)
        return None


class CheckpointStatsTracker:
    """Records stats of finished checkpoints; stats never fail a checkpoint (errors are logged)."""

    def __init__(self, history: StatsHistory | None = None, max_entries: int = 1000) -> None:
        self._history = history if history is not None else InMemoryStatsHistory()
        self._max_entries = max_entries
        self._entries: list[CheckpointStats] | None = None
        self._declined: Counter[CheckpointFailureReason] = Counter()

    def report_completed(self, pending: PendingCheckpoint, metadata: CheckpointMetadata) -> CheckpointStats:
        return self._record(CheckpointStats.completed(pending, metadata))

    def report_failed(self, pending: PendingCheckpoint, failure: CheckpointFailure) -> CheckpointStats:
        return self._record(CheckpointStats.failed(pending, failure))

    def report_declined(self, reason: CheckpointFailureReason) -> None:
        """Count a pre-flight decline (no checkpoint id, so no history record)."""
        self._declined[reason] += 1

    def declined_counts(self) -> dict[CheckpointFailureReason, int]:
        return dict(self._declined)

    def history(self) -> list[CheckpointStats]:
        """The last ``max_entries`` records, oldest first."""
        return list(self._loaded())

    def get(self, checkpoint_id: int) -> CheckpointStats:
        found = next((e for e in reversed(self._loaded()) if e.checkpoint_id == checkpoint_id), None)
        if found is None:
            raise CheckpointNotFound(
                f"No statistics for checkpoint {checkpoint_id} (only the last {self._max_entries} are kept).",
                pointer=str(checkpoint_id),
            )
        return found

    def _record(self, entry: CheckpointStats) -> CheckpointStats:
        entries = (self._loaded() + [entry])[-self._max_entries :]
        self._entries = entries
        try:
            self._history.save(entries)
        except (CheckpointError, OSError) as exc:
            log.warning("could not save checkpoint stats for checkpoint %s: %s", entry.checkpoint_id, exc)
        return entry

    def _loaded(self) -> list[CheckpointStats]:
        if self._entries is None:
            try:
                self._entries = self._history.load()[-self._max_entries :]
            except (CheckpointError, OSError) as exc:
                log.warning("could not load checkpoint stats: %s", exc)
                self._entries = []
        return self._entries
