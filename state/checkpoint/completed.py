"""Completed checkpoints as the store keeps them (Flink's CompletedCheckpoint)."""

from __future__ import annotations

from enum import Enum

from pydantic import AwareDatetime, BaseModel, ConfigDict

from epochal.state.errors import IllegalCheckpointTransition
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from epochal.state.handles import StateHandle
from epochal.state.ids import CheckpointId, Epoch


class RetentionStatus(str, Enum):
    """Where a completed checkpoint is in its retention lifecycle."""

    RETAINED = "retained"  # restorable; counted by retain-N (unless a savepoint)
    SUBSUMED = "subsumed"  # dropped by retain-N; its exclusive files await release
    REMOVED = "removed"  # dropped on request (e.g. a deleted savepoint); files await release
    RELEASED = "released"  # its exclusive files were released; kept as history only
    EXTERNAL = "external"  # read from a foreign pointer; never managed by this store

    @property
    def awaiting_release(self) -> bool:
        return self in AWAITING_RELEASE

    @property
    def restorable(self) -> bool:
        return self in RESTORABLE


RESTORABLE = frozenset({RetentionStatus.RETAINED, RetentionStatus.EXTERNAL})
AWAITING_RELEASE = frozenset({RetentionStatus.SUBSUMED, RetentionStatus.REMOVED})
FINISHED = frozenset({RetentionStatus.RELEASED})
_TRANSITIONS: dict[RetentionStatus, frozenset[RetentionStatus]] = {
    RetentionStatus.RETAINED: frozenset({RetentionStatus.SUBSUMED, RetentionStatus.REMOVED}),
    RetentionStatus.SUBSUMED: frozenset({RetentionStatus.RELEASED}),
    RetentionStatus.REMOVED: frozenset({RetentionStatus.RELEASED}),
    RetentionStatus.RELEASED: frozenset(),
    RetentionStatus.EXTERNAL: frozenset(),
}


class CompletedCheckpoint(BaseModel):
    """A committed checkpoint or savepoint: its metadata, where it lives, its retention status."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metadata: CheckpointMetadata
    metadata_path: str
    status: RetentionStatus = RetentionStatus.RETAINED

    @property
    def checkpoint_id(self) -> CheckpointId:
        return CheckpointId(self.metadata.checkpoint_id)

    @property
    def epoch(self) -> Epoch:
        return Epoch(self.metadata.epoch)

    @property
    def kind(self) -> CheckpointKind:
        return self.metadata.kind

    @property
    def is_savepoint(self) -> bool:
        return self.metadata.kind is CheckpointKind.SAVEPOINT

    @property
    def completed_at(self) -> AwareDatetime:
        return self.metadata.completed_at

    @property
    def handles(self) -> tuple[StateHandle, ...]:
        return self.metadata.handles

    @property
    def retained(self) -> bool:
        return self.status is RetentionStatus.RETAINED

    @property
    def location(self) -> str:
        """The folder holding ``_metadata`` (``chk-<id>`` or ``savepoints/<name>``)."""
        return self.metadata_path.rsplit("/", 1)[0]

    def with_status(self, status: RetentionStatus) -> CompletedCheckpoint:
        """A copy in ``status``; raises IllegalCheckpointTransition if not allowed."""
        if status not in _TRANSITIONS[self.status]:
            raise IllegalCheckpointTransition(
                f"Checkpoint {self.checkpoint_id} cannot go from {self.status.value} to {status.value}.",
                checkpoint_id=self.checkpoint_id,
                status=self.status.value,
                target=status.value,
            )
        return self.model_copy(update={"status": status})
