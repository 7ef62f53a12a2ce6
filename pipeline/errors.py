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
