"""A run over a range of partitions (a backfill): the epochs in order, in one run, one SparkSession.

Dagster submits a backfill of the epoch multi-asset as one run over the whole range
(``BackfillPolicy.single_run()``), or as runs of ``dagster.backfill_chunk``
partitions, wherever it was launched: the asset graph, the asset's or the job's
partitions page, GraphQL. The run:

- restores the newest checkpoint or savepoint before the range's first partition
  (empty state for the first partition of all) when the state is at or past it,
  and replays the range with fresh source plans, checkpointing on the way; a range
  after the state's position just runs on, in order;
- reports each epoch as soon as it is done: its own materializations of every
  asset (one point per epoch in the plots), its asset-check results, and a line in
  the run's log, ``epoch 7 of 24 (2026-11-01-06:00): checkpoint 12 completed in
  3.1 s``. If the run dies half way, the partitions it finished show as
  materialized;
- re-executed (Dagster's *Re-execute*, or a run retry), continues from the state's
  position when that lies inside the range, instead of replaying what was done
  (all of it done: the range is replayed, as a new backfill would), if the run it
  re-executes died inside the range (after its restore, or after one of its
  epochs) and left the state there; a run that died before its restore, or whose
  range was done, is started again as a backfill, restore first.
- marks the partitions after the range out of date as soon as its restore rewinds
  them, so that a run that dies later leaves them marked.

Each epoch's asset-check results are logged as evaluations of its partition as it ends; the op's check
outputs, which Dagster requires, follow at the end without results of their own.
"""

from __future__ import annotations

from typing import Any, Sequence

import dagster as dg

from epochal.orchestration.assets import CHECKPOINT, code_version
from epochal.orchestration.report import asset_metadata, check_results, checkpoint_duration

BACKFILL_TAG = "dagster/backfill"
PARENT_RUN_TAG = "dagster/parent_run_id"
CODE_VERSION_TAG = "dagster/code_version"


class RangeReporter:
    """The runner's ``on_epoch``: logs each finished epoch's events and its progress line."""

    def __init__(self, context: dg.AssetExecutionContext, d, keys: Sequence[str]) -> None:
        self.context, self.d, self.keys = context, d, list(keys)
        self.done: list[str] = []
        self.tags = {CODE_VERSION_TAG: code_version(d.pipeline)}

    def __call__(self, report) -> None:
        checkpoint_s = checkpoint_duration(self.d, report)  # one read of the statistics for both uses
        # The upsert sinks are compared with the state after the range's last partition, not after each.
        log_epoch(self.context, self.d, report, checkpoint_s, self.tags, compare_upserts=report.partition == self.keys[-1])
        self.done.append(report.partition)
        self.context.log.info(progress_line(report, self.keys, checkpoint_s))


def log_epoch(
    context, d, report, checkpoint_s: float | None, tags: dict[str, str] | None = None, *, compare_upserts: bool = True
) -> None:
    """One finished epoch as events of its partition: every asset's materialization, then its check results
    (``compare_upserts``: see ``epochal.pipeline.checks.state_consistency``)."""
    for asset_key, meta in asset_metadata(d, report, checkpoint_s):
        context.log_event(dg.AssetMaterialization(asset_key, partition=report.partition, metadata=meta, tags=tags))
    for result in check_results(d, report, compare_upserts=compare_upserts):
        context.log_event(dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(CHECKPOINT), check_name=result.check_name, passed=result.passed,
            metadata=result.metadata, severity=result.severity, description=result.description,
            partition=report.partition,
        ))


def check_outputs(context: dg.AssetExecutionContext):
    """The op's check outputs, as Dagster requires them: their results were logged per partition as each epoch
    ended (an ``AssetCheckResult`` yielded by a run over a range would name no partition)."""
    for name in context.assets_def.check_specs_by_output_name:
        yield dg.Output(None, output_name=name)


def progress_line(report, keys: Sequence[str], checkpoint_s: float | None) -> str:
    """``epoch 7 of 24 (2026-11-01-06:00): checkpoint 12 completed in 3.1 s`` (epochs before the range: catch-up)."""
    where = f"epoch {keys.index(report.partition) + 1} of {len(keys)}" if report.partition in keys else "catch-up epoch"
    if report.checkpoint_id is None:
        what = f"done in {report.duration_s:.1f} s, no checkpoint due"
    elif report.checkpoint_status == "completed":
        took = report.duration_s if checkpoint_s is None else checkpoint_s
        what = f"checkpoint {report.checkpoint_id} completed in {took:.1f} s"
    else:
        what = f"checkpoint {report.checkpoint_id} {report.checkpoint_status}: {report.checkpoint_detail or 'no reason recorded'}"
    return f"{where} ({report.partition}): {what}"


def run_range(runner, keys: Sequence[str], position: int | None, tags, *, resumed: bool) -> Any:
    """Run the epochs of ``keys`` (in order) as a backfill, a continuation or a resumed re-execution
    (``resumed``: see :func:`resumes_parent`)."""
    d = runner.d
    first, last = d.partitioning.epoch(keys[0]), d.partitioning.epoch(keys[-1])
    if resumed and position is not None and first - 1 <= position < last:
        return runner.run(to=keys[-1], replan=True)
    if BACKFILL_TAG in tags or (position is not None and first <= position):
        return runner.run(from_=keys[0], to=keys[-1], replan=True)
    return runner.run(to=keys[-1])


def resumes_parent(instance: dg.DagsterInstance, tags, keys: Sequence[str], d, position: int | None) -> bool:
    """Whether this run re-executes a run over the same range that died inside it, and the state is where that
    run left it: the nearest run of the chain of re-executions that got into the range (restored before it, or
    finished one of its epochs, each logged as it happens) failed, and the state's position is its last finished
    epoch of the range (none: the epoch before the range). Only then is the position the range's own progress.

    Found from outside (2026-12-06): a run that died before its restore (killed while its JVM started) left the
    position the backfill was to rewind; a run that succeeded left its range done, and a later replay may have
    moved the state back into it. In both cases the re-execution ran only the partitions after the position, and
    late data in the range's first partitions never reached the sinks. Now those start the backfill again."""
    if position is None:
        return False
    wanted, checkpoint = set(keys), dg.AssetKey(CHECKPOINT)
    kinds = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_OBSERVATION}
    seen: set[str] = set()
    run_id = tags.get(PARENT_RUN_TAG)
    while run_id is not None and run_id not in seen:
        seen.add(run_id)
        run = instance.get_run_by_id(run_id)
        if run is None or run.status == dg.DagsterRunStatus.SUCCESS:
            return False
        events = [entry.dagster_event for entry in instance.all_logs(run_id, of_type=kinds)
                  if entry.dagster_event.partition in wanted]
        if events:
            finished = [d.partitioning.epoch(e.partition) for e in events
                        if e.is_step_materialization and e.asset_key == checkpoint]
            return position == (max(finished) if finished else d.partitioning.epoch(keys[0]) - 1)
        run_id = run.tags.get(PARENT_RUN_TAG)
    return False


def missing(keys: Sequence[str], done: Sequence[str], position: int | None, d) -> list[str]:
    """The partitions of ``keys`` that neither ran now nor were done before (a resumed re-execution)."""
    return [k for k in keys if k not in done and (position is None or d.partitioning.epoch(k) > position)]
