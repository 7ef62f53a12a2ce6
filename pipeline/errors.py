"""Errors of the pipeline runtime, kept apart from errors in user stage code."""

from __future__ import annotations

from epochal.errors import EpochalError


class PipelineError(EpochalError):
    """Base of the runtime's errors (message, ``action``, ``context``: see :class:`EpochalError`)."""


class PipelineDefinitionError(PipelineError):
    """The pipeline DAG is malformed (unknown input, cycle, duplicate name)."""


class StageError(PipelineError):
    """An exception raised by a stage's own code (user code), with where it happened."""

    def __init__(self, stage: str, epoch: int, partition: str, cause: BaseException) -> None:
        self.stage = stage
        self.epoch = epoch
        self.partition = partition
        self.cause = cause
        super().__init__(
            f"stage {stage!r} failed at epoch {epoch} (partition {partition}): {type(cause).__name__}: {cause}",
            stage=stage, epoch=epoch, partition=partition,
        )


class ConcurrentRunError(PipelineError):
    """Another run holds this deployment's lease."""


_WAY_OUT = ("fix the cause, then `epochal restore` (the latest completed checkpoint; it clears the failure) "
            "or `epochal checkpoints reset-failures`, and run again")


class PipelineFailedError(PipelineError):
    """The pipeline failed (more consecutive checkpoint failures than ``checkpoints.tolerable_failures``): as in
    Flink, it runs no more epochs until a restore, or an explicit reset, clears the failure."""

    def __init__(self, reason: str, *, epoch: int | None = None, partition: str | None = None, report=None) -> None:
        self.reason, self.epoch, self.partition, self.report = reason, epoch, partition, report
        where = "" if epoch is None else f" at epoch {epoch} (partition {partition})"
        super().__init__(f"the pipeline failed{where}: {reason}", action=_WAY_OUT, epoch=epoch, partition=partition)
