"""The pipeline as Dagster assets: one multi-asset per pipeline, one run per epoch.

Every stage output and every sink is an asset, and ``checkpoint`` (the
coordinator: trigger, collect acks, complete, retain N) depends on all of them,
so the lineage in the UI is the pipeline DAG. Stateful assets (and
``checkpoint``) depend on their own previous partition
(``TimeWindowPartitionMapping(-1, -1)``): state carries over from epoch e-1 to e.

They are one multi-asset that cannot be subset: a run materializes a whole
epoch, or a backfill's whole range of epochs in order, in one process with one
SparkSession (in-process executor). Its backfill policy is one run per backfill
(``BackfillPolicy.single_run()``), or runs of ``dagster.backfill_chunk``
partitions. The outputs are skippable: a range run reports each epoch as events
while it runs (``orchestration/backfill.py``), not as outputs at its end. The op uses the
``epochal`` pool (limit 1 in the instance's ``dagster.yaml``), so only one epoch
runs at a time per deployment, whoever launched it.
"""


import hashlib
import inspect
import warnings
from typing import Any, Iterator

import dagster as dg

from epochal.config import Granularity, Settings
from epochal.orchestration.resources import EpochalResource
from epochal.pipeline.dag import Pipeline

CHECKPOINT = "checkpoint"
POOL = "epochal"
DEPLOYMENT_TAG = "epochal/deployment"
CHECK_COMPLETE = "checkpoint_complete"
CHECK_CONSISTENT = "state_consistent"


def partitions_def(settings: Settings) -> dg.TimeWindowPartitionsDefinition:
    start = settings.partitions.start
    if settings.partitions.granularity is Granularity.DAILY:
        return dg.DailyPartitionsDefinition(start_date=start.strftime("%Y-%m-%d"), timezone="UTC")
    return dg.HourlyPartitionsDefinition(start_date=start.strftime("%Y-%m-%d-%H:%M"), timezone="UTC")


def previous_partition(key: str) -> dg.AssetDep:
    """A dependency on the asset's own previous partition (state carried from epoch e-1 to e)."""
    return dg.AssetDep(key, partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1))


def code_version(pipeline: Pipeline) -> str:
    """A hash of the source of the pipeline's stages: changes when their code changes."""
    digest = hashlib.sha256()
    for stage in pipeline.ordered_stages:
        digest.update(inspect.getsource(type(stage)).encode())
    for sink in pipeline.sinks:
        digest.update(repr((sink.name, sink.input, sink.mode.value, sink.keys, sink.schema.json())).encode())
    return digest.hexdigest()[:16]


def _producer(ref: str) -> str:
    return ref.split(".", 1)[0]


def asset_specs(pipeline: Pipeline, version: str) -> list[dg.AssetSpec]:
    """Specs for every stage and sink of ``pipeline``, and the checkpoint, with the DAG as deps."""
    names = [s.name for s in pipeline.stages] + [s.name for s in pipeline.sinks]
    if CHECKPOINT in names:
        raise ValueError(f"pipeline {pipeline.name!r}: a stage or sink may not be named {CHECKPOINT!r}")
    group, specs = pipeline.name, []
    for stage in pipeline.ordered_stages:
        deps: list[Any] = sorted({_producer(ref) for ref in stage.inputs})
        stateful = bool(stage.keyed_state or stage.operator_state)
        if stateful:
            deps.append(previous_partition(stage.name))
        specs.append(dg.AssetSpec(
            stage.name, deps=deps, group_name=group, code_version=version, kinds={"spark", "delta"} if stateful else {"spark"},
            description=(type(stage).__doc__ or "").strip().splitlines()[0] if type(stage).__doc__ else None,
            tags={"epochal/role": "stage", "epochal/stateful": str(stateful).lower()}, skippable=True,
        ))
    for sink in pipeline.sinks:
        specs.append(dg.AssetSpec(
            sink.name, deps=[_producer(sink.input)], group_name=group, code_version=version, kinds={"delta"},
            description=f"Delta sink ({sink.mode.value}{' on ' + ', '.join(sink.keys) if sink.keys else ''}) fed by {sink.input}",
            tags={"epochal/role": "sink"}, skippable=True,
        ))
    specs.append(dg.AssetSpec(
        CHECKPOINT, deps=names + [previous_partition(CHECKPOINT)], group_name=group, code_version=version,
        description="The checkpoint coordinator: trigger, collect acks, complete, retain N.",
        tags={"epochal/role": "coordinator"}, skippable=True,
    ))
    return specs


def source_specs(pipeline: Pipeline) -> list[dg.AssetSpec]:
    """The sources (landing data): external assets, not materialized by epochal."""
    return [
        dg.AssetSpec(s.name, group_name=pipeline.name, description=f"input read by {type(s).__name__}", kinds={"json"})
        for s in pipeline.sources
    ]


def backfill_policy(settings: Settings) -> dg.BackfillPolicy:
    """One run per backfill, or runs of ``dagster.backfill_chunk`` partitions."""
    chunk = settings.dagster.backfill_chunk
    return dg.BackfillPolicy.single_run() if chunk is None else dg.BackfillPolicy.multi_run(chunk)


def build_epoch_assets(pipeline: Pipeline, settings: Settings) -> dg.AssetsDefinition:
    version = code_version(pipeline)
    specs = asset_specs(pipeline, version)
    with warnings.catch_warnings():  # partitioned checks are a preview in Dagster 1.13: each epoch's own result
        warnings.simplefilter("ignore", dg.PreviewWarning)
        checks = [
            dg.AssetCheckSpec(CHECK_COMPLETE, asset=CHECKPOINT, description="every stage and sink acked the same epoch",
                              partitions_def=partitions_def(settings)),
            dg.AssetCheckSpec(CHECK_CONSISTENT, asset=CHECKPOINT, description="the sinks agree with the state tables",
                              partitions_def=partitions_def(settings)),
        ]

    @dg.multi_asset(
        name=f"{pipeline.name}_epoch", specs=specs, check_specs=checks, partitions_def=partitions_def(settings),
        can_subset=False, pool=POOL, op_tags={DEPLOYMENT_TAG: pipeline.name}, backfill_policy=backfill_policy(settings),
    )
    def epoch_assets(context: dg.AssetExecutionContext, epochal: EpochalResource) -> Iterator[Any]:
        from epochal.orchestration.epoch import run_partition

        yield from run_partition(context, epochal, pipeline_name=pipeline.name)

    return epoch_assets
