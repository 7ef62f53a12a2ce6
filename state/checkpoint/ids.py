"""Checkpoint id counters (Flink's CheckpointIDCounter): durable and monotonic.

Two processes never get the same id. :class:`FileIdCounter` claims ids by
creating ``<dir>/<n>`` exclusively (O_CREAT|O_EXCL on local disks, an
if-absent create on stores that support it); a claim succeeds for exactly one
process. Claims are contiguous, so a new id is larger than every id claimed
before it, by any process.

A ``floor`` (a callable giving the largest id still named elsewhere: checkpoint
folders, store rows, savepoints) is asked once, at a counter's first claim: when
``ids/`` was lost with the rest of the checkpoint storage, the next id still
comes after every id a surviving savepoint or the store names (no collision).
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from fsspec.core import url_to_fs

from epochal.state.errors import CheckpointStorageError
from epochal.state.ids import CheckpointId

FIRST_ID = 1


@runtime_checkable
class CheckpointIdCounter(Protocol):
    """Allocates checkpoint ids: unique, strictly increasing, never reused."""

    def next_id(self) -> CheckpointId:
        """Claim and return the next id."""
        ...

    def last_id(self) -> CheckpointId | None:
        """The highest id claimed so far (by anyone), or None if none was."""
        ...


class InMemoryIdCounter:
    """A counter for one process (tests, throwaway pipelines)."""

    def __init__(self, start: int = FIRST_ID) -> None:
        self._next = start
        self._lock = threading.Lock()

    def next_id(self) -> CheckpointId:
        with self._lock:
            claimed, self._next = self._next, self._next + 1
        return CheckpointId(claimed)

    def last_id(self) -> CheckpointId | None:
        return CheckpointId(self._next - 1) if self._next > FIRST_ID else None

    def advance_past(self, checkpoint_id: int) -> None:
        """Every later id is above ``checkpoint_id`` (see :meth:`FileIdCounter.advance_past`)."""
        with self._lock:
            self._next = max(self._next, int(checkpoint_id) + 1)


class FileIdCounter:
    """A durable counter safe across processes: one claim file per id under ``directory_url``."""

    def __init__(
        self, directory_url: str, storage_options: dict[str, Any] | None = None, *,
        floor: Callable[[], int] | None = None,
    ) -> None:
        self._url = directory_url
        self._floor = floor
        self._fs, self._dir = url_to_fs(directory_url, **(storage_options or {}))
        self._dir = self._dir.rstrip("/")
        self._last: int | None = None
        self._lock = threading.Lock()

    def next_id(self) -> CheckpointId:
        with self._lock:
            candidate = self._first_candidate()
            while not self._claim(candidate):
                candidate = max(candidate + 1, self._highest_claimed() + 1)
            self._last = candidate
        return CheckpointId(candidate)

    def last_id(self) -> CheckpointId | None:
        highest = self._highest_claimed()
        return CheckpointId(highest) if highest >= FIRST_ID else None

    def advance_past(self, checkpoint_id: int) -> None:
        """Every later id is above ``checkpoint_id``: after a restore of it, as Flink's coordinator sets its counter
        past a restored checkpoint's or savepoint's id. A savepoint of another deployment keeps its own id, and
        this deployment's next checkpoint must not take it (one id, two snapshots, in the lineage and the logs)."""
        with self._lock:
            if self._highest_claimed() < int(checkpoint_id):
                self._claim(int(checkpoint_id))  # taken by a concurrent claimer instead: as good
            self._last = max(self._last or FIRST_ID - 1, int(checkpoint_id))

    def prune(self) -> list[int]:
        """Delete every claim below the highest (which keeps the counter where it is); return their ids.

        Safe with concurrent claimers: a new id is always above the highest claim listed, so a
        deleted claim is never taken again.
        """
        highest = self._highest_claimed()
        pruned = []
        for claimed in self._claimed():
            if claimed < highest:
                try:
                    self._fs.rm_file(f"{self._dir}/{claimed}")
                except FileNotFoundError:
                    pass
                pruned.append(claimed)
        return pruned

    def _first_candidate(self) -> int:
        highest = self._highest_claimed() + 1
        if self._last is None:
            floor = self._floor() if self._floor is not None else FIRST_ID - 1
            return max(FIRST_ID, highest, floor + 1)
        return max(self._last + 1, highest)

    def _highest_claimed(self) -> int:
        return max(self._claimed(), default=FIRST_ID - 1)

    def _claimed(self) -> list[int]:
        try:
            names = self._fs.ls(self._dir, detail=False)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointStorageError(
                f"Could not list claimed checkpoint ids at {self._url}: {exc}.",
                action="check the checkpoint storage is reachable.",
                path=self._url,
            ) from exc
        return [int(base) for base in (posixpath.basename(str(n).rstrip("/")) for n in names) if base.isdigit()]

    def _claim(self, candidate: int) -> bool:
        path = f"{self._dir}/{candidate}"
        owner = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
        try:
            self._fs.makedirs(self._dir, exist_ok=True)
            with self._fs.open(path, "xb") as handle:
                handle.write(owner)
        except FileExistsError:
            return False
        except (OSError, ValueError) as exc:
            raise CheckpointStorageError(
                f"Could not claim checkpoint id {candidate} at {self._url}: {exc}.",
                action="check the checkpoint storage is writable and supports exclusive create.",
                path=f"{self._url.rstrip('/')}/{candidate}",
            ) from exc
        return True
