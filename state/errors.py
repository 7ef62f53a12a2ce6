"""Errors raised by the checkpoint engine.

Every error carries structured attributes (the state, the table, the checkpoint)
and a sentence on what to do next, so a caller never parses a message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochal.errors import EpochalError

if TYPE_CHECKING:
    from epochal.state.checkpoint.reasons import CheckpointFailure


_TRACEBACK = "Traceback (most recent call last):"


def _first_line(text: str) -> str:
    """A message's first line; for one carrying a Python traceback (a UDF's error, through Spark's Python worker:
    "An exception was thrown from the Python worker: Traceback ..."), that line with the error the traceback ends in."""
    text = text.strip()
    if _TRACEBACK not in text:
        lines = text.splitlines()
        return lines[0] if lines else ""
    before = text.split(_TRACEBACK, 1)[0].strip().splitlines()
    trace = text.rsplit(_TRACEBACK, 1)[1].splitlines()[1:]
    error = next((line for line in trace if line.strip() and not line[0].isspace()), "")
    return " ".join(part for part in (before[0] if before else "", error.strip()) if part)


def one_line(exc: BaseException) -> str:
    """An exception in one line: for a Java exception raised through py4j, the class and first line of the
    message of its innermost cause (the task's own error, not "An error occurred while calling o850.writeFiles")."""
    from py4j.protocol import Py4JJavaError

    if isinstance(exc, Py4JJavaError):
        try:
            java = exc.java_exception
            for _ in range(32):  # a cause chain is short; a cycle must not loop for ever
                cause = java.getCause()
                if cause is None:
                    break
                java = cause
            return f"{java.getClass().getSimpleName()}: {_first_line(str(java.getMessage() or ''))}".rstrip(": ")
        except Exception:  # noqa: BLE001 - the JVM is gone: fall back to the Python text
            pass
    first = _first_line(str(exc))
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class EpochalStateError(EpochalError):
    """Base of every error raised by ``state/`` (message, ``action``, ``context``: see :class:`EpochalError`)."""


class StateDescriptorError(EpochalStateError):
    """A state descriptor is malformed (bad name, bad schema, bad TTL)."""


class StateSchemaError(EpochalStateError):
    """Values written to a state do not match its declared schema."""


class MaxParallelismMismatch(EpochalStateError):
    """A state table was created with another maximum parallelism than requested."""


class StateTableNotFound(EpochalStateError):
    """A state table or one of its versions is missing."""


# -- checkpoints ------------------------------------------------------------------------


class CheckpointError(EpochalStateError):
    """Base of every error raised by ``epochal.state.checkpoint``."""


class WriterFenced(EpochalStateError):
    """This process may no longer write the deployment's storage: a newer writer took over (see
    :mod:`epochal.state.fence`). Raised before the write; nothing of it was written."""


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
        #: Why, without "The pipeline failed" (what a caller that says it itself adds).
        self.summary = f"{len(failures)} consecutive checkpoint failures (tolerable: {tolerable_failures}): {reasons}"
        super().__init__(
            f"The pipeline failed: {self.summary}.",
            action="fix the cause, then restore the latest completed checkpoint (`epochal restore`, which clears "
            "the failure) or clear it alone (`epochal checkpoints reset-failures`)",
            tolerable_failures=tolerable_failures,
        )


# -- snapshots, restore, retention ------------------------------------------------------


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


class LocationError(EpochalStateError):
    """A configured location cannot be written: its object store's bucket does not exist or cannot be reached."""

    @property
    def key(self) -> str | None:
        return self.context.get("key")  # type: ignore[return-value]


class SparkStartError(EpochalStateError):
    """The Spark session did not start (a master that cannot be reached, a configuration Spark refuses)."""

    def __init__(self, master: str, cause: BaseException) -> None:
        self.master = master
        super().__init__(
            f"Spark did not start with spark.master = {master!r}: {one_line(cause)}",
            action=("check spark.master (a standalone master's host and port must be reachable from here) and the "
                    "spark.conf entries of the configuration"),
            master=master,
        )
