"""Errors raised by the checkpoint subpackage.

Each error is an :class:`~state.errors.EpochalStateError`: a message, an
``action`` sentence for the operator, and structured context (ids, paths) in
``error.context`` so callers never parse the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochal.state.errors import EpochalStateError

if TYPE_CHECKING:
    from epochal.state.checkpoint.reasons import CheckpointFailure


class CheckpointError(EpochalStateError):
    """Base of every error raised by ``epochal.state.checkpoint``."""


class CheckpointStorageError(CheckpointError):
    """Reading, writing, listing or deleting a checkpoint file failed."""

    @property
    def path(self) -> str | None:
        return self.context.get("path")  # type: ignore[return-value]


class CheckpointNotFound(CheckpointError):
    """A pointer (id, ``chk-<id>`` path, savepoint path) names no completed checkpoint."""

    @property
    def pointer(self) -> str | None:
        return self.context.get("pointer")  # type: ignore[return-value]


class InvalidSavepointName(CheckpointError):
    """A savepoint name could escape the savepoints folder or has unsafe characters."""


class SavepointAlreadyExists(CheckpointError):
    """A savepoint with this name already has metadata."""


class CorruptMetadataError(CheckpointError):
    """A ``_metadata`` file is truncated, not JSON, fails validation or its checksum."""

    @property
    def path(self) -> str | None:
        return self.context.get("path")  # type: ignore[return-value]


class UnsupportedMetadataVersion(CheckpointError):
    """A ``_metadata`` file has a format version no migration chain leads from."""


class DuplicateCheckpointError(CheckpointError):
    """The completed-checkpoint store already holds this checkpoint id."""


class IllegalCheckpointTransition(CheckpointError):
    """A lifecycle transition not allowed from the current status."""


class InvalidCheckpointRequest(CheckpointError):
    """A trigger or acknowledgement argument is malformed (a caller bug, not a decline)."""


class HookError(CheckpointError):
    """A user MasterTriggerRestoreHook raised or returned something not JSON-able."""


class PipelineFailed(CheckpointError):
    """More consecutive checkpoint failures than ``tolerable_failures`` allows."""

    def __init__(self, failures: tuple[CheckpointFailure, ...], tolerable_failures: int) -> None:
        self.failures = failures
        self.tolerable_failures = tolerable_failures
        reasons = "; ".join(f.describe() for f in failures) or "no reason recorded"
        super().__init__(
            f"The pipeline failed: {len(failures)} consecutive checkpoint failures "
            f"(tolerable: {tolerable_failures}): {reasons}.",
            action="fix the cause, then reset the failure state (CheckpointFailureManager.reset) "
            "and restore the latest completed checkpoint.",
            tolerable_failures=tolerable_failures,
        )
