"""Errors of snapshots, restore and retention.

Each names the checkpoint, the state or the path it is about in its message and
in ``error.context``, and says what to do next (``error.action``).
"""

from __future__ import annotations

from epochal.state.checkpoint.errors import CheckpointError
from epochal.state.errors import EpochalStateError, StateSchemaError, StateTableNotFound


class SnapshotUnavailable(StateTableNotFound):
    """A handle's table, version, data files or log are missing or unreadable.

    During a restore of the latest checkpoint this makes the restore fall back to
    an older checkpoint; for an explicit pointer it is an error.
    """


class SnapshotWriteError(EpochalStateError):
    """Copying a state table into a full checkpoint or a savepoint cannot proceed."""


class StateMigrationError(StateSchemaError):
    """The stored schema of a state cannot be turned into the one the current code declares."""


class RescaleError(EpochalStateError):
    """The requested parallelism is impossible for a state (above its max parallelism, below 1)."""


class UnclaimedStateError(EpochalStateError):
    """The checkpoint holds state that no current state descriptor claims."""


class CheckpointNotRestorable(CheckpointError):
    """An explicitly requested checkpoint or savepoint cannot be restored (no fallback is taken)."""


class NoRestorableCheckpoint(CheckpointError):
    """Checkpoints were completed, but none of the retained ones can be restored."""


class RetentionError(EpochalStateError):
    """Releasing files failed for some tables; nothing needed was deleted, the next run retries."""


class RestoreFallbackWarning(UserWarning):
    """The latest checkpoint was unusable and an older one is restored instead."""
