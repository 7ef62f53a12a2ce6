"""What the checkpoint coordinator is asked and answers: its policy, a trigger request, and the
results of a trigger, an acknowledgement and a completion (plain values, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochal.config.models import CheckpointMode, CheckpointSettings
from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.pending import AckResult, PendingCheckpoint
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason as Reason
from epochal.state.ids import CheckpointId, Epoch


@dataclass(frozen=True)
class CoordinatorPolicy:
    """The trigger rules: concurrency, pause, timeout, default mode."""

    max_concurrent: int = 1
    min_pause_s: float = 0.0
    timeout_s: float = 600.0
    mode: CheckpointMode = CheckpointMode.INCREMENTAL

    @classmethod
    def from_settings(cls, settings: CheckpointSettings) -> CoordinatorPolicy:
        return cls(settings.max_concurrent, settings.min_pause_s, settings.timeout_s, settings.mode)


@dataclass(frozen=True)
class TriggerRequest:
    """A validated trigger call."""

    epoch: Epoch
    tasks: frozenset[str]
    source_positions: dict[str, Any]
    kind: CheckpointKind
    mode: CheckpointMode
    savepoint_name: str | None
    max_parallelism: int | None


@dataclass(frozen=True)
class TriggerResult:
    """A started pending checkpoint, or the failure (a decline reason) that stopped it."""

    pending: PendingCheckpoint | None = None
    failure: CheckpointFailure | None = None

    @property
    def triggered(self) -> bool:
        return self.pending is not None

    @property
    def reason(self) -> Reason | None:
        return None if self.failure is None else self.failure.reason

    @property
    def checkpoint_id(self) -> CheckpointId | None:
        if self.pending is not None:
            return self.pending.checkpoint_id
        return None if self.failure is None or self.failure.checkpoint_id is None else CheckpointId(self.failure.checkpoint_id)


@dataclass(frozen=True)
class Completion:
    """How completing a fully acknowledged checkpoint ended."""

    checkpoint_id: CheckpointId
    completed: CompletedCheckpoint | None = None
    subsumed: tuple[CompletedCheckpoint, ...] = ()
    failure: CheckpointFailure | None = None

    @property
    def succeeded(self) -> bool:
        return self.completed is not None


@dataclass(frozen=True)
class Acknowledgement:
    """What an ack did; ``completion`` is set when it was the last one a checkpoint needed."""

    result: AckResult
    completion: Completion | None = field(default=None)
