"""The body of the epoch multi-asset: run one partition, report it as asset events.

A run for partition ``K``:

- part of a backfill (tag ``dagster/backfill``), or ``K`` at or before the state's
  position: a backfill. The first partition restores the newest checkpoint or
  savepoint before ``K`` (empty state for the first partition) and replays from
  there with fresh source plans; the next partitions of the backfill follow in
  order, re-planned too. Partitions after the last one that the state had passed
  lost their output with the rewind: each gets an ``out_of_date`` observation on
  ``checkpoint`` and, where the instance's event log can (Postgres), their
  materializations are wiped so they show as missing until they run again.
- after the state's position: runs the epochs from the position up to ``K``
  (normally just ``K``; a schedule that missed windows catches up in order).

A run that is not a schedule's is an operator's action: like restarting a failed
Flink job, it clears the failure manager's verdict first.
"""

from __future__ import annotations

from typing import Any, Iterator

import dagster as dg

from orchestration.assets import CHECK_COMPLETE, CHECK_CONSISTENT, CHECKPOINT
from orchestration.metadata import checkpoint_metadata, restore_metadata, sink_metadata, stage_metadata
from orchestration.resources import EpochalResource
from pipeline.errors import PipelineError
from pipeline.verify import checkpoint_completeness, state_consistency

BACKFILL_TAG = "dagster/backfill"
SCHEDULE_TAG = "dagster/schedule_name"


def run_partition(context: dg.AssetExecutionContext, epochal: EpochalResource, *, pipeline_name: str) -> Iterator[Any]:
    key = context.partition_key
    tags = context.run.tags
    runner = epochal.runner()
    d = runner.d
    if SCHEDULE_TAG not in tags and d.coordinator.pipeline_failure is not None:
        context.log.warning(f"pipeline {pipeline_name} was failed ({d.coordinator.pipeline_failure}); a manual run resets it")
        d.coordinator.failures.reset()
    epoch = d.partitioning.epoch(key)
    position = d.progress.load().last_done_epoch
    backfill = BACKFILL_TAG in tags
    try:
        if backfill or (position is not None and epoch <= position):
            report = runner.run(from_=key, to=key, replan=True)
        else:
            report = runner.run(to=key)
    except PipelineError as exc:
        raise dg.Failure(description=str(exc), metadata={"partition": key, "state_position": str(position)}) from exc
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
    yield from _checks(d, epoch)
    if position is not None and position > epoch:
        _mark_out_of_date(context, d, range(epoch + 1, position + 1))


def _mark_out_of_date(context, d, epochs: range) -> None:
    """Partitions after a backfill's end lost their output with the rewind: they show as missing again."""
    keys = [d.partitioning.key(e) for e in epochs]
    context.log.warning(f"partitions {keys[0]}..{keys[-1]} are out of date after this backfill: run them again")
    meta = {"out_of_date": True, "reason": f"rewound by the backfill of {context.partition_key}"}
    for key in keys:
        context.log_event(dg.AssetObservation(CHECKPOINT, partition=key, metadata=meta))
    try:
        for asset_key in context.assets_def.keys:
            context.instance.wipe_asset_partitions(asset_key, keys)
    except NotImplementedError:  # SQLite event logs cannot wipe partitions (Postgres can): the observations say it
        context.log.info("this instance's event log cannot wipe partitions; out-of-date partitions are recorded as observations")


def _asset_metadata(d, report) -> Iterator[tuple[str, dict[str, Any]]]:
    for stage in d.pipeline.ordered_stages:
        yield stage.name, stage_metadata(report, stage.name)
    for sink in d.pipeline.sinks:
        yield sink.name, sink_metadata(report, sink.name)
    yield CHECKPOINT, checkpoint_metadata(report)


def _record_restore(context, d, restored: dict[str, Any], key: str) -> None:
    meta = restore_metadata(restored, f"restored before backfilling from {key}")
    for name in [s.name for s in d.pipeline.stateful_stages] + [CHECKPOINT]:
        context.log_event(dg.AssetObservation(name, partition=key, metadata=meta))


def _checks(d, epoch: int) -> Iterator[dg.AssetCheckResult]:
    latest = d.coordinator.store.latest()
    checkpointed = latest is not None and int(latest.metadata.epoch) == epoch
    complete = checkpoint_completeness(d, epoch if checkpointed else None)
    yield dg.AssetCheckResult(
        check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=complete.passed,
        description=complete.description, metadata=complete.metadata,
    )
    consistent = state_consistency(d, epoch)
    yield dg.AssetCheckResult(
        check_name=CHECK_CONSISTENT, asset_key=CHECKPOINT, passed=consistent.passed,
        description=consistent.description, metadata=consistent.metadata,
        severity=dg.AssetCheckSeverity.ERROR,
    )
