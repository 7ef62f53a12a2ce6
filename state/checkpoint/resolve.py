"""From an external pointer to a completed checkpoint (Flink's resolveCheckpointPointer).

A pointer is a checkpoint id, a ``chk-<id>`` folder or a savepoint folder (or
name). Checkpoints of this storage must be committed in the store: a
``_metadata`` file whose commit never happened (a completion that crashed) is
not a checkpoint. A folder of another storage (another deployment) is read
from its ``_metadata`` alone, verified by its checksum. So is a savepoint of
this storage that the store does not hold (the store was lost, or its id was
claimed again after ``ids/`` was lost), once it is known to have been committed
(:func:`~epochal.state.checkpoint.survivors.committed_savepoint`): a savepoint is the
user's and outlives the rest of the storage. One the store marks removed stays refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from epochal.state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from epochal.state.checkpoint.lineage import Lineage
from epochal.state.errors import CheckpointNotFound
from epochal.state.checkpoint.metadata import CheckpointMetadata, deserialize
from epochal.state.checkpoint.storage import CheckpointPointer, CheckpointStorage, PointerKind
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.checkpoint.survivors import committed_savepoint, savepoints_in_progress
from epochal.state.ids import CheckpointId

_LIST = "list checkpoints and savepoints with `epochal checkpoints list`."


class CheckpointResolver:
    """Resolves pointers against one storage and its completed-checkpoint store."""

    def __init__(self, storage: CheckpointStorage, store: CompletedCheckpointStore) -> None:
        self._storage = storage
        self._store = store

    def resolve(self, pointer: str | int) -> CompletedCheckpoint:
        """The restorable checkpoint ``pointer`` names, or CheckpointNotFound saying why not."""
        found = self._storage.resolve_pointer(pointer)
        if found.owned and found.checkpoint_id is not None:
            return self._committed(found.checkpoint_id, found)
        metadata = self.read_metadata(found.metadata_path)
        if found.checkpoint_id is not None and found.checkpoint_id != metadata.checkpoint_id:
            raise CheckpointNotFound(
                f"{found.metadata_path} holds checkpoint {metadata.checkpoint_id}, not {found.checkpoint_id}.",
                action=_LIST, pointer=found.pointer,
            )
        if found.owned and found.kind is PointerKind.SAVEPOINT_PATH and not self._in_store(metadata, found):
            if committed_savepoint(self._storage, found.metadata_path) is None:
                raise CheckpointNotFound(
                    f"Savepoint {found.pointer} (checkpoint {metadata.checkpoint_id}) was never committed: it is still "
                    "marked in progress (its process died before the commit), or its _metadata is not a savepoint's.",
                    action=_LIST, pointer=found.pointer, checkpoint_id=metadata.checkpoint_id,
                )
            return CompletedCheckpoint(metadata=metadata, metadata_path=found.metadata_path, status=RetentionStatus.EXTERNAL)
        if found.owned:
            return self._committed(metadata.checkpoint_id, found)
        return CompletedCheckpoint(metadata=metadata, metadata_path=found.metadata_path, status=RetentionStatus.EXTERNAL)

    def _epoch_of(self, metadata_path: str) -> int | None:
        try:
            return int(self.read_metadata(metadata_path).epoch)
        except Exception:  # noqa: BLE001 - gone or unreadable: the epoch is only a hint for the reason
            return None

    def _rewound_since(self, checkpoint_id: int, epoch: int | None = None) -> str | None:
        """The last restore after ``checkpoint_id`` (``_lineage.json``) that rewound to before its ``epoch`` (when
        known), as the reason it may have been removed: a restore to a later epoch removed no checkpoint of it
        (probe 16: a checkpoint retention released was said to be removed by a rewind to a later epoch)."""
        rewinds = [r for r in Lineage(self._storage).load()
                   if r.after >= checkpoint_id and (epoch is None or r.epoch < epoch)]
        if not rewinds:
            return None
        to = "empty state" if rewinds[-1].epoch < 0 else f"epoch {rewinds[-1].epoch}"
        return f"a restore after it rewound the state to {to} and removed the checkpoints of the epochs after that"

    def _failure_of(self, checkpoint_id: int) -> str | None:
        """How checkpoint ``checkpoint_id`` failed, from the statistics' history (Flink's failed checkpoints), if
        it did: an expired or aborted checkpoint was said to be removed by a restore, or forgotten (probe 18)."""
        from epochal.state.checkpoint.stats import JsonLinesStatsHistory, StatsStatus

        try:
            history = JsonLinesStatsHistory(self._storage).load()
        except Exception:  # noqa: BLE001 - the statistics are only a hint for the reason
            return None
        entry = next((e for e in reversed(history) if e.checkpoint_id == checkpoint_id), None)
        if entry is None or entry.status is not StatsStatus.FAILED:
            return None
        reason = entry.failure_reason.name if entry.failure_reason else "a failure"
        detail = (entry.failure_detail or "").strip().splitlines()
        return (f"it failed at epoch {entry.epoch} ({reason}{': ' + detail[0][:200] if detail else ''}) and was never "
                "completed")

    def uncommitted_dirs(self, pending_ids: Iterable[int] = ()) -> list[tuple[CheckpointId, str]]:
        """``chk-<id>`` folders that are neither in the store nor pending: left by failed or
        interrupted completions, safe for cleanup to delete."""
        skip = set(pending_ids)
        return [(cid, url) for cid, url in self._storage.list_checkpoint_dirs()
                if cid not in skip and self._store.get(cid) is None]

    def read_metadata(self, metadata_path: str) -> CheckpointMetadata:
        """Read and verify one ``_metadata`` file."""
        return deserialize(self._storage.read(metadata_path), path=metadata_path)

    def _in_store(self, metadata: CheckpointMetadata, found: CheckpointPointer) -> bool:
        """True if the store's entry of this id is this folder (not absent, not another checkpoint's)."""
        entry = self._store.get(metadata.checkpoint_id)
        return entry is not None and entry.metadata_path.rstrip("/") == found.metadata_path.rstrip("/")

    def _committed(self, checkpoint_id: int, found: CheckpointPointer) -> CompletedCheckpoint:
        entry = self._store.get(checkpoint_id)
        if entry is None:
            known = [int(i) for i in self._store.known_ids()]
            retained = [int(e.checkpoint_id) for e in self._store.all()]  # a rewind drops the newest: not "the newest"
            newest = f"the newest retained is {max(retained)}" if retained else "none is retained"
            abandoned = [name for name, taken in savepoints_in_progress(self._storage) if taken == checkpoint_id]
            rewound = self._rewound_since(checkpoint_id, self._epoch_of(found.metadata_path))
            failed = self._failure_of(checkpoint_id)
            why = (f"it is savepoint '{abandoned[0]}' ({self._storage.savepoint_dir(abandoned[0])}), which was never "
                   "committed: its process died while writing it, and the next savepoint removes its folder"
                   if abandoned else
                   failed if failed else
                   f"no checkpoint {checkpoint_id} was completed yet ({newest})"
                   if known and checkpoint_id > max(known) else
                   f"{rewound}, the likely reason; else it failed, or retention released it and the store forgot it "
                   "(it remembers the last released ones)"
                   if known and rewound else
                   "it failed, its completion was interrupted, or it was released long ago and the store forgot it "
                   "(it remembers the last released ones)" if known else "it was never completed (the store holds none)")
            raise CheckpointNotFound(
                f"Checkpoint {checkpoint_id} ({found.metadata_path}) is not in the completed-checkpoint store: {why}.",
                action=_LIST, pointer=found.pointer, checkpoint_id=checkpoint_id,
            )
        if not entry.status.restorable:
            rewound = (self._rewound_since(checkpoint_id, int(entry.metadata.epoch))
                       if entry.status is not RetentionStatus.SUBSUMED else None)
            raise CheckpointNotFound(
                f"Checkpoint {checkpoint_id} ({found.metadata_path}) is {entry.status.value}: it is no longer retained "
                f"and its files may be gone{f' ({rewound})' if rewound else ''}.",
                action=_LIST, pointer=found.pointer, checkpoint_id=checkpoint_id, status=entry.status.value,
            )
        return entry
