"""The body of the epoch multi-asset: run one partition, report it as asset events.

A run for partition ``K``:

- part of a backfill (tag ``dagster/backfill``), or ``K`` at or before the state's
  position: a backfill. The first partition restores the newest checkpoint or
  savepoint before ``K`` (empty state for the first partition) and replays from
  there with fresh source plans; the next partitions of the backfill follow in
  order, re-planned too. Partitions after the last one that the state had passed
  lost their output with the rewind: where the instance's event log can wipe
  partitions their materializations are wiped, and each gets an ``out_of_date``
  observation on ``checkpoint``.
- after the state's position: runs the epochs from the position up to ``K``
  (normally just ``K``; a schedule that missed windows catches up in order).

While the pipeline is failed (the failure manager gave up), a run the schedule
launched fails with the reason. Any other run (from the UI, a backfill, a
re-execution or retry of a scheduled run) is an operator's action: like
restarting a failed Flink job, it clears the failure first, and puts it back if
the run fails, so only a successful manual run (or a restore) clears it.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Mapping

import dagster as dg

from epochal.errors import EpochalError
from epochal.orchestration.assets import CHECKPOINT
from epochal.orchestration.backfill import (
    BACKFILL_TAG, PARENT_RUN_TAG, RangeReporter, check_outputs, log_epoch, missing, progress_line, resumes_parent,
    run_range,
)
from epochal.orchestration.metadata import restore_metadata
from epochal.orchestration.report import asset_metadata, check_results, checkpoint_duration
from epochal.orchestration.resources import EpochalResource
from epochal.pipeline.errors import PipelineError, SourceNotFoundError, StageError
from epochal.pipeline.partitions import PartitionKeyError, Partitioning
from epochal.pipeline.recovery import Restored
from epochal.state.checkpoint.failure import FailureState, StorageFailureStateRepository
from epochal.state.errors import EpochalStateError

log = logging.getLogger(__name__)

SCHEDULE_TAG = "dagster/schedule_name"
EPOCH_HINT = "check the run's partition and the checkpoint storage; `epochal checkpoints list` shows what can be restored."


def is_schedule_run(tags: Mapping[str, str]) -> bool:
    """Launched by the schedule: re-executions and retries copy the schedule's tag but are an operator's."""
    return SCHEDULE_TAG in tags and PARENT_RUN_TAG not in tags


def operator_failure(exc: Exception, hint: str, **metadata: Any) -> dg.Failure:
    """A dg.Failure with one message saying what to do: a state error's own action, else ``hint``. Raise it as it
    is (no ``from``): it chains only the user's own exception under ``exc`` (a stage, sink or source of theirs
    raised it), whose traceback is theirs to read; epochal's own errors say everything in their message."""
    text = str(exc)
    if isinstance(exc, EpochalStateError) and not exc.action:
        text = f"{text} Operator action: {hint}"
    failure = dg.Failure(description=text, metadata=metadata)
    cause = exc.__cause__
    user_code = isinstance(exc, (StageError, SourceNotFoundError)) and not isinstance(cause, EpochalError)
    failure.__cause__ = cause if user_code else None
    failure.__suppress_context__ = True
    return failure


#: The run tags that name the partitions of a run: one partition, or a backfill's range.
PARTITION_TAGS = ("dagster/partition", "dagster/asset_partition_range_start", "dagster/asset_partition_range_end")


def partition_keys(context: dg.AssetExecutionContext, epochal: EpochalResource) -> list[str]:
    """The run's partition keys, its tags checked first: Dagster reads a key it does not offer leniently (a daily
    run tagged ``2026-11-05-17:30`` ran 2026-11-06 and recorded its checks on the tag) or fails with a CheckError."""
    partitioning = Partitioning.from_settings(epochal.settings().partitions)
    for name in PARTITION_TAGS:
        if (raw := context.run.tags.get(name)) is None:
            continue
        try:
            partitioning.epoch(raw)
        except PartitionKeyError as exc:
            raise dg.Failure(description=f"run tag {name}={raw}: {exc}; nothing ran") from None
    return list(context.partition_keys)


def run_partition(context: dg.AssetExecutionContext, epochal: EpochalResource, *, pipeline_name: str) -> Iterator[Any]:
    keys = partition_keys(context, epochal)
    if len(keys) > 1:
        yield from _run_partitions(context, epochal, keys, pipeline_name)
        return
    key = keys[0]
    runner = epochal.runner(lazy=True)  # Spark starts once the run knows its length (spark.jit: auto)
    d = runner.d
    durations: dict[int, float | None] = {}  # each checkpoint's statistics read once, for the log and the metadata

    def on_epoch(done) -> None:
        durations[done.epoch] = checkpoint_duration(d, done)
        if done.partition != key:  # a catch-up epoch: reported as it ends (if the run dies later, it stays)
            log_epoch(context, d, done, durations[done.epoch], compare_upserts=False)  # compared after ``key``'s
        context.log.info(progress_line(done, keys, durations[done.epoch]))

    runner.on_epoch = on_epoch
    epoch = d.partitioning.epoch(key)
    position = d.progress.load().last_done_epoch
    runner.on_restore = _restore_reporter(context, d, key, epoch, position, key)
    saved = _clear_failure(context, d, pipeline_name)
    try:
        report = _run(runner, key, epoch, position, backfill=BACKFILL_TAG in context.run.tags)
    except BaseException:
        if saved is not None:
            _put_back_failure(d, saved)
        raise
    target = next((e for e in report.epochs if e.partition == key), None)
    if target is None:
        raise dg.Failure(description=f"partition {key} did not run (state at {position})")
    for asset_key, meta in asset_metadata(d, target, durations.get(target.epoch)):
        yield dg.MaterializeResult(asset_key=asset_key, metadata=meta)
    yield from check_results(d, target)


def _run_partitions(context, epochal: EpochalResource, keys: list[str], pipeline_name: str) -> Iterator[Any]:
    """A backfill's range in this run (``orchestration/backfill.py``): each epoch reported as it is done."""
    runner = epochal.runner()
    d = runner.d
    position = d.progress.load().last_done_epoch
    reporter = RangeReporter(context, d, keys)
    runner.on_epoch = reporter
    runner.on_restore = _restore_reporter(context, d, keys[0], d.partitioning.epoch(keys[-1]), position,
                                          f"{keys[0]}..{keys[-1]}")
    where = "the beginning" if position is None else d.partitioning.key(position)
    context.log.info(f"{len(keys)} partitions {keys[0]}..{keys[-1]} in this run, one SparkSession; the state is at {where}")
    saved = _clear_failure(context, d, pipeline_name)
    try:
        resumed = resumes_parent(context.instance, context.run.tags, keys, d, position)
        run_range(runner, keys, position, context.run.tags, resumed=resumed)
    except BaseException as exc:
        if saved is not None:
            _put_back_failure(d, saved)
        if isinstance(exc, (PipelineError, EpochalStateError)):
            raise operator_failure(exc, EPOCH_HINT, partitions=f"{keys[0]}..{keys[-1]}", state_position=where)
        raise
    if left := missing(keys, reporter.done, position, d):
        raise dg.Failure(description=f"partitions {left} did not run (state at {where})")
    yield from check_outputs(context)


def _run(runner, key: str, epoch: int, position: int | None, *, backfill: bool):
    try:
        if backfill or (position is not None and epoch <= position):
            return runner.run(from_=key, to=key, replan=True)
        return runner.run(to=key)
    except (PipelineError, EpochalStateError) as exc:
        raise operator_failure(exc, EPOCH_HINT, partition=key, state_position=str(position))


def _clear_failure(context, d, pipeline_name: str) -> FailureState | None:
    """Refuse a scheduled run of a failed pipeline; any other run clears the failure (returned, to put back)."""
    failure = d.coordinator.pipeline_failure
    if failure is None:
        return None
    if is_schedule_run(context.run.tags):
        raise dg.Failure(description=(
            f"pipeline {pipeline_name} is failed, so the schedule runs no epoch: {failure} In Dagster: run the "
            "'restore' job, or run this partition manually (a successful manual run clears the failure)."
        ))
    context.log.warning(f"pipeline {pipeline_name} was failed ({failure}); this manual run resets it, and puts it back if it fails")
    saved = d.coordinator.failures.state
    d.coordinator.failures.reset()
    return saved


def _put_back_failure(d, saved: FailureState) -> None:
    """A failed manual run leaves the pipeline failed: the earlier failures, then this run's."""
    state = FailureState(failures=saved.failures + d.coordinator.failures.state.failures, failed=True)
    try:
        StorageFailureStateRepository(d.coordinator.storage).save(state)
    except (EpochalStateError, OSError):  # never hide the run's own error
        log.exception("could not put the checkpoint failure state back")


def epoch_asset_keys(d) -> list[str]:
    """Every asset of the epoch multi-asset: the stages, the sinks and ``checkpoint``."""
    return [s.name for s in d.pipeline.ordered_stages] + [s.name for s in d.pipeline.sinks] + [CHECKPOINT]


def mark_out_of_date(context, d, epochs: range, reason: str) -> None:
    """Partitions whose output was rewound (by a backfill or a restore): they show as out of date.

    Wipes first (where the event log can), then records the observations, so the wipe never deletes them.
    """
    keys = [d.partitioning.key(e) for e in epochs]
    if not keys:
        return
    context.log.warning(f"partitions {keys[0]}..{keys[-1]} are out of date ({reason}): run them again")
    try:
        for asset_key in epoch_asset_keys(d):
            context.instance.wipe_asset_partitions(dg.AssetKey(asset_key), keys)
    except NotImplementedError:  # Dagster's SQL event logs cannot wipe partitions: the observations say it
        context.log.info("this instance's event log cannot wipe partitions; out-of-date partitions are recorded as observations")
    meta = {"out_of_date": True, "reason": reason}
    for key in keys:
        context.log_event(dg.AssetObservation(CHECKPOINT, partition=key, metadata=meta))


def _restore_reporter(context, d, key: str, last: int, position: int | None, what: str):
    """The runner's ``on_restore`` for a run from ``key`` to epoch ``last``: the restore observed on the state's
    assets and the partitions it rewound past ``last`` marked out of date, both as it happens, before the run's
    epochs, so that a run dying later leaves them logged."""
    def on_restore(restored: Restored, backfill: bool) -> None:
        _record_restore(context, d, restored, key, backfill)
        if position is not None and position > last:
            cause = f"the backfill of {what}" if backfill else f"the recovery before {what}"
            mark_out_of_date(context, d, range(last + 1, position + 1), f"rewound by {cause}")

    return on_restore


def _record_restore(context, d, restored: Restored, key: str, backfill: bool) -> None:
    """The restore observed on the state's assets at ``key``: a backfill's own restore, or a recovery (the last run
    or restore died: the latest completed checkpoint restored, and this run goes on from it). Found from outside
    (2026-12-06): a resumed re-execution's recovery was labelled a backfill's restore from ``key``, on a partition
    the killed run had materialized and the recovery did not rewind."""
    if backfill:
        action = f"restored before backfilling from {key}"
    else:
        where = "empty state" if restored.epoch is None else f"{restored.partition}"
        action = f"recovered after a run or restore that died: restored to {where}, running on from there"
    meta = restore_metadata(restored, action)
    for name in [s.name for s in d.pipeline.stateful_stages] + [CHECKPOINT]:
        context.log_event(dg.AssetObservation(name, partition=key, metadata=meta))
