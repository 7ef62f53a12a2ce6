"""What this process remembers of the Delta logs it read (:data:`REPLAYS`), for :class:`~epochal.state.delta.log.DeltaLog`.

An epoch reads each state table's log several times; with this, each commit file is read and parsed once a
process. The replay itself, and the check that an entry still holds, are in :mod:`epochal.state.delta.log`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass
class Remembered:
    """What this process last read of one table's log: the newest version it replayed, that version's commit
    file as read (the check that the table is still the one it read), the replay there, and the commits it
    parsed on the way (the newest :data:`COMMITS_KEPT`)."""

    version: int
    text: str
    replay: Any  # log._Replay, never changed once remembered (a replay going on from it works on a copy)
    commits: dict[int, list[dict[str, Any]]]


COMMITS_KEPT = 256


class ReplayCache:
    """The log of each table this process read last, to go on from (least recently used table first out).

    An epoch reads each state table's log several times (its pinned read, the overwrite, the checkpoint's
    snapshot, retention's versions of the grace period), one version further or at versions already read:
    with this, each commit file is read and parsed once. An entry is used only while the log still holds the
    commit file of its version with the same content (one read: a table deleted and created again at the same
    path has other commits).
    """

    def __init__(self, tables: int = 256) -> None:
        self._entries: OrderedDict[str, Remembered] = OrderedDict()
        self._tables = tables
        self._lock = threading.Lock()

    def get(self, url: str) -> Remembered | None:
        with self._lock:
            entry = self._entries.get(url)
            if entry is not None:
                self._entries.move_to_end(url)
            return entry

    def put(self, url: str, entry: Remembered) -> None:
        with self._lock:
            current = self._entries.get(url)
            if current is not None and current.version > entry.version:
                return
            self._entries[url] = entry
            self._entries.move_to_end(url)
            while len(self._entries) > self._tables:
                self._entries.popitem(last=False)

    def drop(self, url: str) -> None:
        with self._lock:
            self._entries.pop(url, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: One per process (see :class:`ReplayCache`).
REPLAYS = ReplayCache()
