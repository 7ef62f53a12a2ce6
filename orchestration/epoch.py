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

from epochal.orchestration.assets import CHECK_COMPLETE, CHECK_CONSISTENT, CHECKPOINT
from epochal.orchestration.metadata import checkpoint_metadata, restore_metadata, sink_metadata, stage_metadata
from epochal.orchestration.resources import EpochalResource
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.recovery import Restored
from epochal.pipeline.checks import checkpoint_completeness, state_consistency
from epochal.state.checkpoint.failure import FailureState, StorageFailureStateRepository
from epochal.state.errors import EpochalStateError

log = logging.getLogger(__name__)

BACKFILL_TAG = "dagster/backfill"
SCHEDULE_TAG = "dagster/schedule_name"
PARENT_RUN_TAG = "dagster/parent_run_id"
UNCHECKPOINTED = ("failed", "declined")
EPOCH_HINT = "check the run's partition and the checkpoint storage; `epochal checkpoints list` shows what can be restored."


def is_schedule_run(tags: Mapping[str, str]) -> bool:
    """Launched by the schedule: re-executions and retries copy the schedule's tag but are an operator's."""
    return SCHEDULE_TAG in tags and PARENT_RUN_TAG not in tags


def operator_failure(exc: Exception, hint: str, **metadata: Any) -> dg.Failure:
    """A dg.Failure with one message saying what to do: a state error's own action, else ``hint``."""
    text = str(exc)
    if isinstance(exc, EpochalStateError) and not exc.action:
        text = f"{text} Operator action: {hint}"
    return dg.Failure(description=text, metadata=metadata)


def run_partition(context: dg.AssetExecutionContext, epochal: EpochalResource, *, pipeline_name: str) -> Iterator[Any]:
    key = context.partition_key
    runner = epochal.runner()
    d = runner.d
    epoch = d.partitioning.epoch(key)
    position = d.progress.load().last_done_epoch
    saved = _clear_failure(context, d, pipeline_name)
    try:
        report = _run(runner, key, epoch, position, backfill=BACKFILL_TAG in context.run.tags)
    except BaseException:
        if saved is not None:
            _put_back_failure(d, saved)
        raise
    if report.restored is not None:
        _record_restore(context, d, report.restored, key)
    target = None
    for epoch_report in report.epochs:
        if epoch_report.partition == key:
            target = epoch_report
        else:
            for asset_key, meta in _asset_metadata(d, epoch_report):
                context.log_event(dg.AssetMaterialization(asset_key, partition=epoch_report.partition, metadata=meta))
    if target is None:
        raise dg.Failure(description=f"partition {key} did not run (state at {position})")
    for asset_key, meta in _asset_metadata(d, target):
        yield dg.MaterializeResult(asset_key=asset_key, metadata=meta)
    yield from _checks(d, target)
    if position is not None and position > epoch:
        mark_out_of_date(context, d, range(epoch + 1, position + 1), f"rewound by the backfill of {key}")


def _run(runner, key: str, epoch: int, position: int | None, *, backfill: bool):
    try:
        if backfill or (position is not None and epoch <= position):
            return runner.run(from_=key, to=key, replan=True)
        return runner.run(to=key)
    except (PipelineError, EpochalStateError) as exc:
        raise operator_failure(exc, EPOCH_HINT, partition=key, state_position=str(position)) from exc


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


def _asset_metadata(d, report) -> Iterator[tuple[str, dict[str, Any]]]:
    for stage in d.pipeline.ordered_stages:
        yield stage.name, stage_metadata(report, stage.name)
    for sink in d.pipeline.sinks:
        yield sink.name, sink_metadata(report, sink.name)
    yield CHECKPOINT, checkpoint_metadata(report, _checkpoint_duration(d, report))


def _checkpoint_duration(d, report) -> float | None:
    """Seconds from the checkpoint's trigger to its end (its statistics), when it has an id."""
    if report.checkpoint_id is None:
        return None
    try:
        return d.coordinator.stats.get(report.checkpoint_id).duration_s
    except EpochalStateError:  # no statistics kept for it
        return None


def _record_restore(context, d, restored: Restored, key: str) -> None:
    meta = restore_metadata(restored, f"restored before backfilling from {key}")
    for name in [s.name for s in d.pipeline.stateful_stages] + [CHECKPOINT]:
        context.log_event(dg.AssetObservation(name, partition=key, metadata=meta))


def _checks(d, report) -> Iterator[dg.AssetCheckResult]:
    yield _completeness(d, report)
    consistent = state_consistency(d, report.epoch)
    yield dg.AssetCheckResult(
        check_name=CHECK_CONSISTENT, asset_key=CHECKPOINT, passed=consistent.passed,
        description=consistent.description, metadata=consistent.metadata,
        severity=dg.AssetCheckSeverity.ERROR,
    )


def _completeness(d, report) -> dg.AssetCheckResult:
    """This epoch's checkpoint, if one was due; else (none due by interval) the latest completed one."""
    if report.checkpoint_status in UNCHECKPOINTED:
        name = "checkpoint" if report.checkpoint_id is None else f"checkpoint {report.checkpoint_id}"
        return dg.AssetCheckResult(
            check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=False, severity=dg.AssetCheckSeverity.ERROR,
            description=f"the {name} of epoch {report.epoch} ({report.partition}) {report.checkpoint_status}: "
                        f"{report.checkpoint_detail or 'no reason recorded'}",
            metadata={"checkpoint_status": report.checkpoint_status, "checkpoint_id": -1 if report.checkpoint_id is None else report.checkpoint_id},
        )
    latest = d.coordinator.store.latest()
    checkpointed = latest is not None and int(latest.metadata.epoch) == report.epoch
    complete = checkpoint_completeness(d, report.epoch if checkpointed else None)
    return dg.AssetCheckResult(
        check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=complete.passed,
        description=complete.description, metadata=complete.metadata, severity=dg.AssetCheckSeverity.ERROR,
    )
