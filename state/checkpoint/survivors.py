"""What is left after the checkpoint storage was lost: savepoints, and every id still visible.

A savepoint is the user's (Flink's savepoints are owned by the user, not the job): when the
completed-checkpoint store is gone, every committed savepoint folder under the deployment's
savepoints folder is still restorable. Committed means: its ``_metadata`` verifies (checksum,
format) and names a savepoint, and its :data:`SAVEPOINT_IN_PROGRESS` marker is gone (the marker
is removed only after the store commit, so a folder without it was committed once).

* :func:`committed_savepoint` reads one such folder (the resolver's way to accept a savepoint
  the store lost, when the user names it).
* :func:`rebuild_store` re-adds them to an EMPTY store (the store was lost or never written),
  so that ``epochal checkpoints list`` shows them again and a run can restore them. Only a
  savepoints folder inside the checkpoints folder is read: a separate ``checkpoints.savepoints_dir``
  may be shared by deployments, and another deployment's savepoints are never adopted.
* :func:`highest_visible_id` is the floor of the id counter: the largest id that a ``chk-<id>``
  folder, a store row, a savepoint's ``_metadata`` or in-progress marker still names, so that
  ids claimed after ``ids/`` was lost never collide with them.
"""

from __future__ import annotations

import logging

from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata, deserialize
from epochal.state.checkpoint.storage import SAVEPOINT_IN_PROGRESS, CheckpointStorage
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.errors import DuplicateCheckpointError, EpochalStateError

log = logging.getLogger(__name__)


def committed_savepoint(storage: CheckpointStorage, metadata_path: str) -> CheckpointMetadata | None:
    """The savepoint at ``metadata_path`` if it was committed (see the module docstring), else None."""
    folder = metadata_path.rsplit("/", 1)[0]
    if storage.exists(f"{folder}/{SAVEPOINT_IN_PROGRESS}"):
        return None
    metadata = deserialize(storage.read(metadata_path), path=metadata_path)
    return metadata if metadata.kind is CheckpointKind.SAVEPOINT else None


def surviving_savepoints(storage: CheckpointStorage) -> list[CompletedCheckpoint]:
    """Committed savepoints under the storage's savepoints folder, by ascending id; unreadable ones skipped."""
    found: dict[int, CompletedCheckpoint] = {}
    for name in storage.list_savepoints():
        path = storage.savepoint_metadata_path(name)
        try:
            if not storage.exists(path) or (metadata := committed_savepoint(storage, path)) is None:
                continue
        except EpochalStateError as exc:
            log.warning("savepoint folder %s is not restorable: %s", path.rsplit("/", 1)[0], exc)
            continue
        if metadata.checkpoint_id in found:  # a copy of the same savepoint under another name
            log.warning("savepoints %s and %s hold the same checkpoint %s: listing the first",
                        found[metadata.checkpoint_id].metadata_path, path, metadata.checkpoint_id)
            continue
        found[metadata.checkpoint_id] = CompletedCheckpoint(metadata=metadata, metadata_path=path)
    return [found[i] for i in sorted(found)]


def rebuild_store(storage: CheckpointStorage, store: CompletedCheckpointStore) -> list[CompletedCheckpoint]:
    """Re-add the surviving savepoints to an empty store (the store was lost); return those added."""
    if not storage.savepoints_inside_base or not storage.list_savepoints() or store.known_ids():
        return []
    added = []
    for entry in surviving_savepoints(storage):
        try:
            store.add(entry)
        except DuplicateCheckpointError:  # another process rebuilt it meanwhile
            continue
        log.warning("the completed-checkpoint store had no entry: savepoint %s (checkpoint %s, epoch %s) at %s "
                    "is registered again", entry.metadata.savepoint_name, int(entry.checkpoint_id),
                    int(entry.epoch), entry.location)
        added.append(entry)
    return added


def highest_visible_id(storage: CheckpointStorage, store: CompletedCheckpointStore) -> int:
    """The largest checkpoint id still named anywhere in the storage (0 if none)."""
    ids = [int(cid) for cid, _ in storage.list_checkpoint_dirs()]
    ids += [int(i) for i in store.known_ids()]
    ids += [int(e.checkpoint_id) for e in surviving_savepoints(storage)]
    ids += [checkpoint_id for _, checkpoint_id in savepoints_in_progress(storage)]
    return max(ids, default=0)


def savepoints_in_progress(storage: CheckpointStorage) -> list[tuple[str, int]]:
    """``(name, checkpoint id)`` of each savepoint being taken, or abandoned by a process that died while it wrote
    it: its in-progress marker holds the id."""
    found = []
    for name in storage.list_savepoints():
        marker = f"{storage.savepoint_dir(name)}/{SAVEPOINT_IN_PROGRESS}"
        try:
            text = storage.read(marker).decode().strip() if storage.exists(marker) else ""
        except EpochalStateError:
            text = ""
        if text.isdigit():
            found.append((name, int(text)))
    return found


__all__ = ["committed_savepoint", "highest_visible_id", "rebuild_store", "savepoints_in_progress", "surviving_savepoints"]
