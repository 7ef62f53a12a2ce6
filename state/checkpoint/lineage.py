"""Which retained checkpoints and savepoints are on the state's history (its lineage).

A restore that rewinds the state starts a new history from the restored epoch: the epochs after it are run
again, a backfill's with fresh source plans (late files read). The checkpoints of the epochs after it are
removed (``Recovery._drop_checkpoints_after``), but savepoints are the user's and stay, and a forward restore
(a savepoint ahead of the state) keeps the checkpoints of the history it leaves. Those are snapshots of a
history the state no longer has: restoring one *automatically* (a backfill's restore before its range, a
recovery after a crash, ``epochal restore`` without a pointer) would bring back a state without the replay's
rows and rewind the sinks to it, silently. Found from outside (probe 12, 2026-12-07): a backfill restored a
savepoint taken before a later replay of late data, and the late rows left the sinks.

``_lineage.json`` in checkpoint storage records every restore, in order: the highest checkpoint id claimed
when it happened (ids only grow, so a snapshot with a higher id was taken after it), the restored epoch
(-1: empty state) and the restored checkpoint's id (None: empty state, or a savepoint of another deployment,
whose history is not this one's). From it, :meth:`Lineage.history` gives any snapshot's history (and the
state's, now) as segments ``(first epoch, restore)``; a snapshot of epoch E is on the state's history when both
agree up to E. A storage without the file (written before it existed) has one history: everything is on it.
An explicit restore by id, name or path is never refused: it is how a user goes back to another history.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.errors import CheckpointStorageError
from epochal.state.fence import Fence, no_fence

log = logging.getLogger(__name__)
#: The snapshots named off the state's history, each once a process: (restore history, id, what was being done).
_SAID: set[tuple[str, int, str]] = set()

LINEAGE_FILE = "_lineage.json"

#: A history: its segments, each ``(first epoch, restore number)`` (0: the history before any restore).
History = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RestoreRecord:
    """One restore: ``after`` the highest checkpoint id claimed then, to ``epoch`` (-1: empty state) from
    ``restored`` (this storage's checkpoint or savepoint id; None: empty state or another deployment's)."""

    after: int
    epoch: int
    restored: int | None
    #: It was asked to drop state no stage declares (``--allow-non-restored-state``): a recovery that restores a
    #: snapshot taken before it (id <= ``after``) drops the same, as Flink's failover keeps the job's restore settings.
    allow_non_restored_state: bool = False


class Lineage:
    """The restores of one checkpoint storage, and the history of each snapshot (see the module docstring)."""

    def __init__(self, storage: CheckpointStorage, fence: Fence = no_fence) -> None:
        self._storage = storage
        self._fence = fence
        self._path = storage.child(LINEAGE_FILE)

    def load(self) -> list[RestoreRecord]:
        if not self._storage.exists(self._path):
            return []
        raw = self._storage.read(self._path)
        try:
            return [RestoreRecord(int(r["after"]), int(r["epoch"]), None if r["restored"] is None else int(r["restored"]),
                                  bool(r.get("allow_non_restored_state", False)))
                    for r in json.loads(raw)["restores"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointStorageError(
                f"the restore history {self._path} is corrupt ({type(exc).__name__}: {exc}; {len(raw)} bytes)",
                action="delete it to treat every retained checkpoint and savepoint as on the state's history, or "
                       "restore one explicitly by id or name",
                path=self._path,
            ) from exc

    def record(self, *, after: int | None, epoch: int | None, restored: int | None,
               allow_non_restored_state: bool = False) -> None:
        """Add a restore to ``epoch`` (None: empty state), after the snapshots up to id ``after``."""
        records = self.load()
        records.append(RestoreRecord(after or 0, -1 if epoch is None else int(epoch), restored, allow_non_restored_state))
        self._fence("record the restore in the state's history")
        self._storage.write_atomic(self._path, json.dumps({"restores": [asdict(r) for r in records]}).encode())

    def split(self, entries: Iterable[CompletedCheckpoint], doing: str
              ) -> tuple[list[CompletedCheckpoint], list[CompletedCheckpoint]]:
        """``entries`` on the state's history (in their order) and those off it, each of these named in a warning:
        never restored when ``doing`` (a backfill's restore, a restore without a pointer)."""
        entries = list(entries)
        off = {int(e.checkpoint_id) for e in self.off_history(entries)}
        for entry in entries:
            said = (self._path, int(entry.checkpoint_id), doing)
            if int(entry.checkpoint_id) in off and said not in _SAID:
                _SAID.add(said)  # once a process: a run looks for a snapshot to restore more than once
                log.warning("not restoring %s %s: it is off the state's history (a later restore rewound past it, "
                            "and the epochs after that were run again)", describe(entry), doing)
        return ([e for e in entries if int(e.checkpoint_id) not in off],
                [e for e in entries if int(e.checkpoint_id) in off])

    def off_history(self, entries: Iterable[CompletedCheckpoint]) -> list[CompletedCheckpoint]:
        """The entries that are not on the state's history now (oldest id first)."""
        records = self.load()
        if not records:
            return []
        now = history(records, None)
        return sorted((e for e in entries if not on_history(records, now, int(e.checkpoint_id), int(e.metadata.epoch))),
                      key=lambda e: int(e.checkpoint_id))


def history(records: Sequence[RestoreRecord], checkpoint_id: int | None) -> History:
    """The history of the snapshot ``checkpoint_id`` (None: of the state now) from the restores before it."""
    before = [i for i, r in enumerate(records) if checkpoint_id is None or r.after < checkpoint_id]
    if not before:
        return ((0, 0),)
    number = before[-1]
    last = records[number]
    base: History = () if last.restored is None else _upto(history(records, last.restored), last.epoch)
    return base + ((last.epoch + 1, number + 1),)


def on_history(records: Sequence[RestoreRecord], now: History, checkpoint_id: int, epoch: int) -> bool:
    """Whether the snapshot ``checkpoint_id`` of ``epoch`` is a state the history ``now`` went through."""
    return _upto(history(records, checkpoint_id), epoch) == _upto(now, epoch)


def _upto(segments: History, epoch: int) -> History:
    return tuple(s for s in segments if s[0] <= epoch)


def describe(entry: CompletedCheckpoint) -> str:
    what = (f"savepoint {entry.metadata.savepoint_name!r}" if entry.is_savepoint
            else f"checkpoint {int(entry.checkpoint_id)}")
    return f"{what} (id {int(entry.checkpoint_id)}, epoch {int(entry.metadata.epoch)})"
