"""Savepoints: a self-contained copy of the state at its current position, owned by the user
(Flink's savepoint), taken between epochs through the same coordinator as checkpoints, as a
:class:`epochal.pipeline.epoch.SavepointTransaction` (the epoch's transaction without data)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from epochal.pipeline.epoch import SavepointTransaction
from epochal.pipeline.errors import PipelineError
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
    d.fence("discard abandoned savepoints")
    discard_abandoned_savepoints(d.storage, d.coordinator.store, in_flight)
    completed = SavepointTransaction(d, epoch).run(name)
    meta = completed.metadata
    return {
        "id": int(meta.checkpoint_id),
        "name": meta.savepoint_name,
        "epoch": epoch,
        "partition": d.partitioning.key(epoch),
        "path": completed.metadata_path.rsplit("/", 1)[0],
    }
