"""A checkpoint waiting for its acknowledgements (Flink's PendingCheckpoint)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from epochal.config.models import CheckpointMode
from epochal.state.errors import IllegalCheckpointTransition
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata, SinkPosition, TaskAckInfo
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.handles import StateHandle
from epochal.state.ids import CheckpointId, Epoch


class PendingStatus(str, Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    ABORTED = "aborted"
    EXPIRED = "expired"

    @property
    def is_final(self) -> bool:
        return self is not PendingStatus.PENDING


IN_PROGRESS_STATUSES = frozenset({PendingStatus.PENDING})
SUCCESS_STATUSES = frozenset({PendingStatus.COMPLETED})
FAILED_STATUSES = frozenset({PendingStatus.ABORTED, PendingStatus.EXPIRED})
_TRANSITIONS: dict[PendingStatus, frozenset[PendingStatus]] = {
    PendingStatus.PENDING: frozenset({PendingStatus.COMPLETED, PendingStatus.ABORTED, PendingStatus.EXPIRED}),
    PendingStatus.COMPLETED: frozenset(),
    PendingStatus.ABORTED: frozenset(),
    PendingStatus.EXPIRED: frozenset(),
}


class AckResult(str, Enum):
    """What became of one acknowledgement (Flink's TaskAcknowledgeResult, plus EPOCH_MISMATCH)."""

    SUCCESS = "success"  # recorded
    DUPLICATE = "duplicate"  # this task already acknowledged this checkpoint; ignored
    UNKNOWN = "unknown"  # no such checkpoint, or the task is not one that must acknowledge it
    DISCARDED = "discarded"  # the checkpoint is already completed, aborted or expired (a late ack)
    EPOCH_MISMATCH = "epoch_mismatch"  # the ack is for another epoch than the checkpoint's; ignored


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskAck(_Frozen):
    """One stage's or sink's acknowledgement: its epoch and its state handles."""

    task: str
    epoch: int
    acknowledged_at: AwareDatetime
    handles: tuple[StateHandle, ...] = ()
    sinks: tuple[SinkPosition, ...] = ()


class CheckpointSpec(_Frozen):
    """What a checkpoint was triggered as; fixed for its whole life."""

    checkpoint_id: int = Field(ge=1)
    epoch: int = Field(ge=0)
    kind: CheckpointKind
    mode: CheckpointMode
    savepoint_name: str | None = None
    tasks: frozenset[str]
    source_positions: dict[str, Any] = Field(default_factory=dict)
    hook_states: dict[str, Any] = Field(default_factory=dict)
    triggered_at: AwareDatetime
    deadline: AwareDatetime
    location: str = Field(description="the folder of this checkpoint (chk-<id> or savepoints/<name>)")
    metadata_path: str
    max_parallelism: int | None = None


class PendingCheckpoint:
    """The acknowledgements collected so far for one checkpoint, and its status."""

    def __init__(self, spec: CheckpointSpec) -> None:
        self.spec = spec
        self._acks: dict[str, TaskAck] = {}
        self._status = PendingStatus.PENDING
        self._failure: CheckpointFailure | None = None
        self._finished_at: datetime | None = None

    def __repr__(self) -> str:
        return f"PendingCheckpoint(id={self.checkpoint_id}, epoch={self.epoch}, {self._status.value}, " \
               f"waiting for {sorted(self.not_yet_acknowledged)})"

    # ------------------------------------------------------------- queries
    @property
    def checkpoint_id(self) -> CheckpointId:
        return CheckpointId(self.spec.checkpoint_id)

    @property
    def epoch(self) -> Epoch:
        return Epoch(self.spec.epoch)

    @property
    def kind(self) -> CheckpointKind:
        return self.spec.kind

    @property
    def is_savepoint(self) -> bool:
        return self.spec.kind is CheckpointKind.SAVEPOINT

    @property
    def status(self) -> PendingStatus:
        return self._status

    @property
    def failure(self) -> CheckpointFailure | None:
        return self._failure

    @property
    def finished_at(self) -> datetime | None:
        return self._finished_at

    @property
    def acks(self) -> tuple[TaskAck, ...]:
        return tuple(self._acks[t] for t in sorted(self._acks))

    @property
    def not_yet_acknowledged(self) -> frozenset[str]:
        return self.spec.tasks - self._acks.keys()

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self.not_yet_acknowledged

    def is_overdue(self, now: datetime) -> bool:
        return self._status is PendingStatus.PENDING and now >= self.spec.deadline

    # --------------------------------------------------------- transitions
    def acknowledge(
        self, task: str, epoch: int, handles: Iterable[StateHandle], at: datetime, sinks: Iterable[SinkPosition] = ()
    ) -> AckResult:
        """Record ``task``'s acknowledgement; never raises for a late, unknown or repeated ack."""
        if self._status is not PendingStatus.PENDING:
            return AckResult.DISCARDED
        if task not in self.spec.tasks:
            return AckResult.UNKNOWN
        if task in self._acks:
            return AckResult.DUPLICATE
        if epoch != self.spec.epoch:
            return AckResult.EPOCH_MISMATCH
        self._acks[task] = TaskAck(task=task, epoch=epoch, acknowledged_at=at, handles=tuple(handles), sinks=tuple(sinks))
        return AckResult.SUCCESS

    def mark_completed(self, at: datetime) -> None:
        if not self.is_fully_acknowledged:
            raise IllegalCheckpointTransition(
                f"Checkpoint {self.checkpoint_id} cannot complete: waiting for {sorted(self.not_yet_acknowledged)}.",
                checkpoint_id=self.checkpoint_id,
            )
        self._transition(PendingStatus.COMPLETED, at)

    def record_source_position(self, source: str, position: dict[str, Any]) -> None:
        """Keep what ``source`` planned for the checkpoint's epoch (its own position, plain JSON) beside the epoch
        and partition it was triggered with: an epoch's checkpoint is triggered before its sources plan."""
        positions = dict(self.spec.source_positions)
        as_json = json.loads(json.dumps(position, sort_keys=True, default=str))  # a tuple kept as the list recorded
        positions[source] = {**positions.get(source, {}), "position": as_json}
        self.spec = self.spec.model_copy(update={"source_positions": positions})

    def abort(self, failure: CheckpointFailure) -> None:
        """Fail the checkpoint; an expiry reason makes it EXPIRED, any other ABORTED."""
        expired = failure.reason is CheckpointFailureReason.CHECKPOINT_EXPIRED
        self._transition(PendingStatus.EXPIRED if expired else PendingStatus.ABORTED, failure.at)
        self._failure = failure

    def to_metadata(self, completed_at: datetime) -> CheckpointMetadata:
        """The ``_metadata`` record of this checkpoint, completed at ``completed_at``."""
        spec = self.spec
        return CheckpointMetadata.create(
            checkpoint_id=spec.checkpoint_id, epoch=spec.epoch, kind=spec.kind, mode=spec.mode,
            savepoint_name=spec.savepoint_name, triggered_at=spec.triggered_at, completed_at=completed_at,
            source_positions=spec.source_positions, hook_states=spec.hook_states,
            handles=tuple(h for ack in self.acks for h in ack.handles),
            acks=tuple(self._ack_info(ack) for ack in self.acks),
            sinks=tuple(p for ack in self.acks for p in ack.sinks), max_parallelism=spec.max_parallelism,
        )

    def _ack_info(self, ack: TaskAck) -> TaskAckInfo:
        latency = max(0.0, (ack.acknowledged_at - self.spec.triggered_at).total_seconds())
        return TaskAckInfo(task=ack.task, acknowledged_at=ack.acknowledged_at, latency_s=latency,
                           handle_keys=tuple(h.key for h in ack.handles))

    def _transition(self, target: PendingStatus, at: datetime) -> None:
        if target not in _TRANSITIONS[self._status]:
            raise IllegalCheckpointTransition(
                f"Checkpoint {self.checkpoint_id} cannot go from {self._status.value} to {target.value}.",
                checkpoint_id=self.checkpoint_id, status=self._status.value, target=target.value,
            )
        self._status = target
        self._finished_at = at
