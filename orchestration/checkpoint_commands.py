"""``epochal checkpoints``: the completed-checkpoint store, listed and inspected, and the failure count reset, all
read and written without Spark (no JVM starts)."""

from __future__ import annotations

from typing import Any, Callable


def _metadata_found(storage, c) -> tuple[bool, bool]:
    """Whether a listed snapshot's ``_metadata`` is there, and whether it is corrupt (it no longer reads or verifies
    against its checksum: a restore refuses it and falls back), read without Spark."""
    from epochal.state.checkpoint.metadata import deserialize

    if not storage.exists(c.metadata_path):
        return False, False
    try:
        deserialize(storage.read(c.metadata_path), path=c.metadata_path)
    except Exception:  # noqa: BLE001 - any failure to read it back is what the listing reports
        return True, True
    return True, False


def _checkpoint_row(key: Callable[[int], str], c, on_history: bool = True, found: tuple[bool, bool] = (True, False)
                    ) -> dict[str, Any]:
    m = c.metadata
    present, corrupt = found
    return {
        "id": int(c.checkpoint_id),
        "epoch": int(m.epoch),
        "partition": key(int(m.epoch)),
        "status": c.status.value if hasattr(c.status, "value") else str(c.status),
        # False: a snapshot of a history the state left (a later restore rewound past it): restored only by name
        "on_history": on_history,
        # False: its _metadata is gone (a savepoint folder deleted by hand): still in the store, no longer restorable
        "present": present,
        # True: its _metadata is there but no longer reads or matches its checksum (a restore refuses it)
        "corrupt": corrupt,
        "kind": m.kind.value,
        "name": m.savepoint_name,  # a savepoint's (None for a checkpoint)
        "created": m.completed_at.isoformat(),
        "duration_s": m.duration_s,
        "state_rows": m.state_rows,
        "state_bytes": m.state_bytes,
        "bytes_written": m.bytes_written,
        "parallelism": m.parallelism,
        "metadata_path": c.metadata_path,
    }


def _reset_failures(settings) -> dict[str, Any]:
    """Forget the checkpoint failures (no Spark: the failure state is one file in checkpoint storage)."""
    from epochal.state.checkpoint.failure import StorageFailureStateRepository
    from epochal.state.checkpoint.storage import CheckpointStorage

    repository = StorageFailureStateRepository(CheckpointStorage(settings.checkpoints.dir))
    before = repository.load()
    repository.save(type(before)())
    return {"was_failed": before.failed, "cleared": [f.describe() for f in before.failures]}


def _checkpoint_view(settings) -> tuple[Any, Any, Callable[[Any], Any], Callable[[int], str]]:
    """The completed-checkpoint store, a resolver and partition keys, read without Spark (no JVM is started).

    A store that lists nothing may have been lost: the savepoints left under ``savepoints/`` are registered
    again, as a run's coordinator does (by delta-rs; a fresh deployment or a mistyped folder has none).
    """
    from epochal.pipeline.partitions import Partitioning
    from epochal.state.checkpoint.resolve import CheckpointResolver
    from epochal.state.checkpoint.storage import CheckpointStorage
    from epochal.state.checkpoint.store import DeltaCompletedCheckpointStore
    from epochal.state.checkpoint.survivors import rebuild_store

    storage = CheckpointStorage(settings.checkpoints.dir, settings.checkpoints.savepoints_dir)
    store = DeltaCompletedCheckpointStore(None, storage.completed_store_url, settings.checkpoints.retain)
    rebuild_store(storage, store)
    return storage, store, CheckpointResolver(storage, store).resolve, Partitioning.from_settings(settings.partitions).key


def checkpoints(settings, action: str, pointer: str | None) -> dict[str, Any]:
    """``epochal checkpoints list``, ``inspect POINTER`` and ``reset-failures``, read without Spark."""
    if action == "reset-failures":
        return _reset_failures(settings)
    from epochal.state.checkpoint.completed import RetentionStatus
    from epochal.state.checkpoint.lineage import Lineage

    storage, store, resolve, key = _checkpoint_view(settings)
    lineage = Lineage(storage)
    if action == "list":
        retained = sorted(store.all(), key=lambda c: int(c.checkpoint_id))
        off = {int(c.checkpoint_id) for c in lineage.off_history(retained)}
        return {"checkpoints": [_checkpoint_row(key, c, int(c.checkpoint_id) not in off, _metadata_found(storage, c))
                                for c in retained]}
    checkpoint = resolve(pointer)
    on_history = checkpoint.status is not RetentionStatus.RETAINED or not lineage.off_history([checkpoint])
    row = _checkpoint_row(key, checkpoint, on_history, _metadata_found(storage, checkpoint))
    row["handles"] = [h.model_dump(mode="json") for h in checkpoint.metadata.handles]
    row["source_positions"] = checkpoint.metadata.source_positions
    return row
