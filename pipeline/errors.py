"""Errors of the pipeline runtime, kept apart from errors in user stage code."""

from __future__ import annotations

from typing import Sequence

from epochal.errors import EpochalError
from epochal.state.errors import one_line


class PipelineError(EpochalError):
    """Base of the runtime's errors (message, ``action``, ``context``: see :class:`EpochalError`)."""


class PipelineDefinitionError(PipelineError):
    """The pipeline DAG is malformed (unknown input, cycle, duplicate name)."""


def computed_lazily(exc: BaseException) -> bool:
    """Whether Spark raised ``exc`` computing a job: the failing expression may come from any frame the one being
    computed was built from (an analysis or parse error is raised where the frame is built)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import AnalysisException, CapturedException, ParseException

    if isinstance(exc, Py4JJavaError):
        return True
    return isinstance(exc, CapturedException) and not isinstance(exc, (AnalysisException, ParseException))


def user_frame(exc: BaseException) -> str | None:
    """Where in the user's code ``exc`` was raised or passed through last: the innermost frame of its traceback
    outside epochal, PySpark and py4j (``file:line in function``), or None."""
    import os
    import traceback

    import py4j
    import pyspark

    import epochal
    import epochal.config
    import epochal.pipeline
    import epochal.state

    # a traceback caught at the stage boundary holds the frames from there down: no orchestration frame
    modules = (epochal, epochal.config, epochal.pipeline, epochal.state, pyspark, py4j)
    ours = tuple(os.path.dirname(m.__file__) + os.sep for m in modules if m.__file__)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if not frame.filename.startswith(ours):
            name = frame.filename
            if name.startswith(os.getcwd() + os.sep):
                name = os.path.relpath(name)
            return f"{name}:{frame.lineno} in {frame.name}"
    return None


class StageError(PipelineError):
    """An exception raised by a stage's own code (user code), with where it happened.

    The message's first line (what the command line prints) ends with :func:`one_line` of the cause (and, for an
    error Spark raised computing a job, the stages its inputs were computed in, ``upstream``, where the failing
    expression may be); the cause's whole text follows on the next lines."""

    what = "stage"
    lazily = "this stage's or in a stage it reads"

    def __init__(self, stage: str, epoch: int, partition: str, cause: BaseException, upstream: Sequence[str] = ()) -> None:
        self.stage = stage
        self.epoch = epoch
        self.partition = partition
        self.cause = cause
        where = f"{self.what} {stage!r} failed at epoch {epoch} (partition {partition})"
        full = f"{type(cause).__name__}: {cause}"
        first = one_line(cause)
        notes = []
        if (state := getattr(cause, "epochal_state", None)) is not None:  # a keyed state write's job failed
            frame = user_frame(cause)
            notes += [f"while writing state {state}"] + ([f"at {frame}"] if frame is not None else [])
        if upstream and computed_lazily(cause):
            notes.append(f"Spark computes lazily: the failing expression may be {self.lazily}: {', '.join(upstream)}")
        elif state is None and (frame := user_frame(cause)) is not None:
            notes.append(f"at {frame}")
        if notes:
            first += f" ({'; '.join(notes)})"
        super().__init__(f"{where}: {first}" + ("" if full == first else f"\n{full}"),
                         **{self.what: stage}, epoch=epoch, partition=partition)


class SinkError(StageError):
    """A sink's write failed (often where a stage's lazy output is first computed), with where it happened."""

    what = "sink"
    lazily = "in the stages its input is computed in"

    @property
    def sink(self) -> str:
        return self.stage


class SinkSchemaError(SinkError):
    """A sink's table has other columns (names or types) than its SinkSpec declares: its write is refused before
    anything is written to it (see :mod:`epochal.pipeline.sink_schema`)."""

    def __init__(self, sink: str, epoch: int, partition: str | None, path: str, differences: str, action: str,
                 *, up_front: bool = False) -> None:
        self.stage, self.epoch, self.partition, self.path, self.cause = sink, epoch, partition, path, None
        at = f"epoch {epoch}" + ("" if partition is None else f" (partition {partition})")
        where = f"sink {sink!r} refused before {at}" if up_front else f"sink {sink!r} failed at {at}"
        done = "no epoch ran" if up_front else "nothing was written to it"
        PipelineError.__init__(
            self, f"{where}: its table {path} does not have the SinkSpec's columns ({differences}); {done}.",
            action=action, sink=sink, epoch=epoch, partition=partition, table=path,
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


class SourceNotFoundError(PipelineError):
    """A source's landing folder does not exist (a configuration mistake: nothing would ever be read)."""


class PartitionsChangedError(PipelineError):
    """``partitions.start`` or ``partitions.granularity`` differ from those that numbered the deployment's epochs
    (epoch N is the Nth window from the start): running on would read other windows as the same epochs."""


class UnreadFilesError(PipelineError):
    """An epoch's input holds files that would not be read, and the epoch would be done without them: files its
    source would not read and none it would, files in a day folder outside its hour folders, names Spark reads as
    a glob pattern or a URI."""


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
