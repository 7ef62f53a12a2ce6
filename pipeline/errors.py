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


class InputChangedError(PipelineError):
    """A replayed epoch's planned input file changed or disappeared since its plan was recorded."""

    def __init__(self, source: str, epoch: int, partition: str | None, path: str, what: str) -> None:
        self.source, self.epoch, self.partition, self.path = source, epoch, partition, path
        super().__init__(
            f"source {source!r}, epoch {epoch} (partition {partition}): planned input file {path} {what}; "
            "a replay must read the input the epoch first read",
            action=("put the file back as it was, or re-plan the range on purpose with a backfill "
                    f"(`epochal run --from {partition} --to ...`)"),
            source=source, epoch=epoch, partition=partition, file=path,
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
