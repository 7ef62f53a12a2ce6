"""Savepoints: a self-contained copy of the state at its current position, owned by the user
(Flink's savepoint), taken between epochs through the same coordinator as checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochal.pipeline.errors import PipelineError
from epochal.pipeline.faults import crashpoint
from epochal.state.backends.operator import OperatorStateStore
from epochal.state.checkpoint.retention import discard_abandoned_savepoints

if TYPE_CHECKING:
    from epochal.pipeline.runner import EpochRunner


def take_savepoint(runner: EpochRunner, name: str | None = None) -> dict[str, Any]:
    """Take a savepoint of ``runner``'s state (recovering an unfinished epoch or restore first)."""
    from epochal.state.checkpoint.storage import validate_name

    if name is not None:
        validate_name(name)  # before any work: a bad name must not first trigger a restore
    d = runner.d
    progress = d.progress.load()
    if not progress.clean:
        runner.recover(progress)
        progress = d.progress.load()
    epoch = progress.last_done_epoch
    if epoch is None:
        raise PipelineError("nothing to save: no epoch has run yet (run some partitions first)")
    # A savepoint that died before its commit frees its name (and its copy) now.
    in_flight = [p.checkpoint_id for p in d.coordinator.pending_checkpoints()]
    discard_abandoned_savepoints(d.storage, d.coordinator.store, in_flight)
    tasks = [f"stage:{s.name}" for s in d.pipeline.ordered_stages] + [f"sink:{name}" for name in d.sinks]
    positions = {s.name: {"epoch": epoch, "partition": d.partitioning.key(epoch)} for s in d.pipeline.sources}
    result = d.coordinator.trigger_savepoint(epoch, tasks, positions, name=name, max_parallelism=d.pipeline.max_parallelism)
    if not result.triggered:
        raise PipelineError(f"savepoint declined: {result.reason.name if result.reason else 'unknown'}")
    pending = result.pending
    completion = None
    for stage in d.pipeline.ordered_stages:
        crashpoint("in_savepoint", epoch)
        handles = runner._handles_for_ack(stage, OperatorStateStore(d.operator[stage.name], d.parallelism), pending)
        ack = d.coordinator.acknowledge(pending.checkpoint_id, f"stage:{stage.name}", epoch, handles)
        completion = ack.completion or completion
    for name, sink in d.sinks.items():  # the sinks are at the state's position (the last epoch done): record it
        ack = d.coordinator.acknowledge(pending.checkpoint_id, f"sink:{name}", epoch, (), sinks=(sink.position(),))
        completion = ack.completion or completion
    if completion is None or not completion.succeeded:
        detail = completion.failure.reason.name if completion and completion.failure else "incomplete"
        raise PipelineError(f"savepoint {pending.spec.savepoint_name} failed: {detail}")
    return {
        "id": int(pending.checkpoint_id),
        "name": pending.spec.savepoint_name,
        "epoch": epoch,
        "partition": d.partitioning.key(epoch),
        "path": completion.completed.metadata_path.rsplit("/", 1)[0],
    }
