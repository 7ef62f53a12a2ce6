"""Jobs besides the epochs: ``restore`` and ``savepoint`` (DESIGN section 4).

Each records what it did as asset events (observations on the state's assets
and the checkpoint), so the state tables' history in the UI shows restores and
savepoints. Both use the ``epochal`` pool: they never overlap an epoch.
"""


from typing import Optional

import dagster as dg

from orchestration.assets import CHECKPOINT, DEPLOYMENT_TAG, POOL
from orchestration.metadata import restore_metadata
from orchestration.resources import EpochalResource
from pipeline.errors import PipelineError


class RestoreConfig(dg.Config):
    """What to restore: the latest completed checkpoint (neither given), a checkpoint id, or a savepoint path."""

    checkpoint: Optional[int] = None
    savepoint: Optional[str] = None
    parallelism: Optional[int] = None


class SavepointConfig(dg.Config):
    """The savepoint's name (default: one made from its id)."""

    name: Optional[str] = None


def _state_assets(runner) -> list[str]:
    return [s.name for s in runner.d.pipeline.stateful_stages] + [CHECKPOINT]


@dg.op(pool=POOL)
def restore_state(context: dg.OpExecutionContext, config: RestoreConfig, epochal: EpochalResource) -> dict:
    """Restore state and sinks (NO_CLAIM: the checkpoint or savepoint is only read); resets the failure manager."""
    if config.checkpoint is not None and config.savepoint is not None:
        raise dg.Failure(description="restore: give a checkpoint id or a savepoint path, not both")
    runner = epochal.runner()
    pointer = config.savepoint if config.savepoint is not None else config.checkpoint
    try:
        result = runner.restore(pointer, parallelism=config.parallelism)
    except PipelineError as exc:
        raise dg.Failure(description=str(exc)) from exc
    runner.d.coordinator.failures.reset()
    what = "latest checkpoint" if pointer is None else f"{'savepoint' if config.savepoint else 'checkpoint'} {pointer}"
    meta = restore_metadata(result, f"restore of the {what}")
    for name in _state_assets(runner):
        context.log_event(dg.AssetObservation(name, partition=result.get("partition"), metadata=meta))
    for skipped in result.get("skipped", []):
        context.log.warning(f"skipped an unusable checkpoint: {skipped}")
    return result


@dg.op(pool=POOL)
def take_savepoint(context: dg.OpExecutionContext, config: SavepointConfig, epochal: EpochalResource) -> dict:
    """Take a savepoint (a self-contained copy of every state table) at the state's position."""
    runner = epochal.runner()
    try:
        result = runner.savepoint(config.name)
    except PipelineError as exc:
        raise dg.Failure(description=str(exc)) from exc
    meta = {
        "action": dg.MetadataValue.text("savepoint"),
        "savepoint_id": dg.MetadataValue.int(int(result["id"])),
        "savepoint_name": dg.MetadataValue.text(str(result["name"])),
        "epoch": dg.MetadataValue.int(int(result["epoch"])),
        "path": dg.MetadataValue.path(str(result["path"])),
    }
    context.log_event(dg.AssetObservation(CHECKPOINT, partition=result["partition"], metadata=meta))
    return result


def build_jobs(pipeline_name: str) -> tuple[dg.JobDefinition, dg.JobDefinition]:
    tags = {DEPLOYMENT_TAG: pipeline_name}

    @dg.job(name="restore", tags=tags, executor_def=dg.in_process_executor)
    def restore_job() -> None:
        restore_state()

    @dg.job(name="savepoint", tags=tags, executor_def=dg.in_process_executor)
    def savepoint_job() -> None:
        take_savepoint()

    return restore_job, savepoint_job
