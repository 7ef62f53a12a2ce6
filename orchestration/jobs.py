"""Jobs besides the epochs: ``restore`` and ``savepoint`` (DESIGN section 4).

Each records what it did as asset events (observations on the state's assets
and the checkpoint), so the state tables' history in the UI shows restores and
savepoints. A restore also marks the partitions after the restored epoch out of
date (their sink rows were rewound). Both use the ``epochal`` pool: they never
overlap an epoch. A bad run config (a checkpoint id, savepoint path, parallelism
or savepoint name) fails the run with one message saying what to do.
"""


from typing import Optional

import dagster as dg

from epochal.orchestration import console
from epochal.orchestration.assets import CHECKPOINT, DEPLOYMENT_TAG, POOL
from epochal.orchestration.epoch import mark_out_of_date, operator_failure
from epochal.orchestration.metadata import restore_metadata
from epochal.orchestration.resources import EpochalResource
from epochal.pipeline.errors import PipelineError
from epochal.state.errors import EpochalStateError

RESTORE_HINT = (
    "check the restore config: `epochal checkpoints list` shows the checkpoint ids and savepoint paths "
    "that can be restored; parallelism is between 1 and the pipeline's max parallelism."
)
SAVEPOINT_HINT = "check the savepoint name (one path segment, not taken yet) and that an epoch has run."


class RestoreConfig(dg.Config):
    """What to restore: the latest completed checkpoint (neither given), a checkpoint id, or a savepoint path."""

    checkpoint: Optional[int] = None
    savepoint: Optional[str] = None
    parallelism: Optional[int] = None
    allow_non_restored_state: bool = False  # Flink's allowNonRestoredState: drop state no stage declares any more


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
    position = _position(runner)
    try:
        result = runner.restore(
            pointer, parallelism=config.parallelism, allow_non_restored_state=config.allow_non_restored_state
        )
    except (PipelineError, EpochalStateError) as exc:
        raise operator_failure(exc, RESTORE_HINT)
    runner.d.coordinator.failures.reset()
    what = "latest checkpoint" if pointer is None else f"{'savepoint' if config.savepoint else 'checkpoint'} {pointer}"
    context.log.info(console.restore(result.to_dict()))  # what `epochal restore` prints
    meta = restore_metadata(result, f"restore of the {what}")
    for name in _state_assets(runner):
        context.log_event(dg.AssetObservation(name, partition=result.partition, metadata=meta))
    for skipped in result.skipped:
        context.log.warning(f"skipped an unusable checkpoint: {skipped}")
    if position is not None:
        first = 0 if result.epoch is None else result.epoch + 1
        mark_out_of_date(context, runner.d, range(first, position + 1), f"rewound by the restore of the {what}")
    return result.to_dict()


def _position(runner) -> int | None:
    """The last epoch done before the restore (where the sinks were), None if unknown."""
    try:
        return runner.d.progress.load().last_done_epoch
    except PipelineError:  # a corrupt position file: the restore rewrites it
        return None


@dg.op(pool=POOL)
def take_savepoint(context: dg.OpExecutionContext, config: SavepointConfig, epochal: EpochalResource) -> dict:
    """Take a savepoint (a self-contained copy of every state table) at the state's position."""
    runner = epochal.runner(lazy=True)  # no JVM unless a restore or a large state copy needs one
    try:
        result = runner.savepoint(config.name)
    except (PipelineError, EpochalStateError) as exc:
        raise operator_failure(exc, SAVEPOINT_HINT)
    meta = {
        "action": dg.MetadataValue.text("savepoint"),
        "savepoint_id": dg.MetadataValue.int(int(result["id"])),
        "savepoint_name": dg.MetadataValue.text(str(result["name"])),
        "epoch": dg.MetadataValue.int(int(result["epoch"])),
        "path": dg.MetadataValue.path(str(result["path"])),
    }
    context.log.info(f"savepoint {result['name']} (id {result['id']}) of epoch {result['epoch']} "
                     f"({result['partition']}): {result['path']}")
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
