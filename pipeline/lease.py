"""The deployment lease: one run, restore or savepoint of a deployment at a time.

Two ``epochal run`` on the same deployment would interleave their epochs,
their state writes and their retention: the lease makes the second one stop
before it touches anything, with a :class:`ConcurrentRunError` naming the
holder. A crashed holder does not block forever: its lease expires.

Files: ``<checkpoints>/_lease/<generation>.json``, one per acquisition, created
with an exclusive create (``O_CREAT|O_EXCL`` locally, an if-absent create on
object stores), so of two processes that try the same generation exactly one
succeeds. The lease is the newest generation; it is free when that file says
``released``, when its ``expires_at`` is past, or when its holder's process is
gone (same host only). A free lease is taken by creating the next generation
(a stale one is taken over with a warning naming its holder); older
generations are then deleted.

The holder renews the lease (``expires_at = now + checkpoints.lease_timeout_s``)
from a heartbeat thread every third of the timeout and at every epoch (a nested
:meth:`DeploymentLease.hold`). A renewal that finds a newer generation means
the lease was taken over while this process stalled: :class:`LeaseLost` stops
the run at its next epoch. Between epochs, every write that matters is fenced
(:meth:`DeploymentLease.check_fence`, the generation is the fencing token): the
completion commit, each sink write, state table writes and restores, the run
position, retention. A stalled process that resumes after another took over is
refused with :class:`FencedError` before it writes anything more.

Holding is re-entrant within one :class:`DeploymentLease` (``run`` restores and
runs epochs under one lease). Two leases in one process (two deployments
objects on the same storage) exclude each other like two processes do.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from epochal.pipeline.errors import ConcurrentRunError, PipelineError
from epochal.state.checkpoint.clock import Clock
from epochal.state.errors import CheckpointNotFound, WriterFenced
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.session import DRIVER_PID_ENV

log = logging.getLogger("epochal.lease")

LEASE_DIR = "_lease"
_F = TypeVar("_F", bound=Callable[..., Any])


class LeaseLost(PipelineError):
    """This process's lease was taken over (it stalled longer than the lease timeout): stop writing."""


class FencedError(LeaseLost, WriterFenced):
    """A write refused by the fence: a newer generation of the lease exists, so this process (which stalled past
    its lease's expiry) may no longer write the deployment; raised before the write, nothing of it was written."""


class LeaseRecord(BaseModel):
    """What one generation file holds."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    generation: int
    holder: str
    command: str
    pid: int | None
    host: str
    acquired_at: datetime
    expires_at: datetime
    released: bool = False

    def describe(self) -> str:
        return (
            f"holder {self.holder} (command {self.command!r}, pid {self.pid} on host {self.host}, "
            f"acquired {self.acquired_at.isoformat()}, expires {self.expires_at.isoformat()})"
        )


def process_alive(pid: int | None) -> bool:
    """True unless ``pid`` is known to be gone on this host (no such process, or a zombie)."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def stop_orphans(driver_pid: int, *, wait_s: float = 30.0) -> list[int]:
    """Kill the processes a dead driver left on this host (its Spark JVM, PySpark's workers: their environment
    names it, :data:`DRIVER_PID_ENV`) and wait until they are gone; return their ids.

    A driver killed by SIGKILL takes its JVM down only when the JVM notices (a few seconds): a Delta commit the
    JVM was making could land after the next run restored the tables, an epoch's rows twice. Linux (``/proc``)."""
    marker = f"{DRIVER_PID_ENV}={driver_pid}".encode()
    found = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    for pid in found:
        log.warning("stopping process %s, left running by the dead driver %s (its Spark JVM or a worker)", pid, driver_pid)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while any(process_alive(pid) for pid in found) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


class DeploymentLease:
    """The lease on one checkpoint storage (see the module docstring)."""

    def __init__(
        self, storage: CheckpointStorage, timeout_s: float, clock: Clock, *, host: str | None = None,
        pid: int | None = None, heartbeat: bool = True, preflight: Callable[[], None] | None = None,
    ) -> None:
        self._storage = storage
        #: Checks before the first write of this process (the deployment's locations): run once, at the first acquire.
        self._preflight = preflight
        self._dir = storage.child(LEASE_DIR)
        self.timeout = timedelta(seconds=timeout_s)
        self._clock = clock
        self.holder = uuid.uuid4().hex[:12]
        self._host = host or socket.gethostname()
        self._pid = os.getpid() if pid is None else pid
        self._heartbeat_enabled = heartbeat
        self._lock = threading.RLock()
        self._record: LeaseRecord | None = None
        self._depth = 0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self._dir

    @property
    def held(self) -> bool:
        return self._record is not None

    # -------------------------------------------------------------------------------- public

    @contextlib.contextmanager
    def hold(self, command: str) -> Iterator[LeaseRecord]:
        """Hold the lease for the block: acquire it (outermost) or renew it (nested), release at the end."""
        with self._lock:
            if self._depth == 0:
                self.acquire(command)
            else:
                self.renew()
            self._depth += 1
        try:
            yield self._record  # type: ignore[misc]
        finally:
            with self._lock:
                self._depth -= 1
                last = self._depth == 0
            if last:
                self.release()

    def acquire(self, command: str) -> LeaseRecord:
        """Take the lease, or raise :class:`ConcurrentRunError` naming its live holder."""
        with self._lock:
            if self._preflight is not None:
                self._preflight()
                self._preflight = None
            for _ in range(3):
                current = self.current()
                if current is not None and self._live(current):
                    raise self._busy(current)
                generation = 1 if current is None else current.generation + 1
                record = self._new_record(generation, command)
                if self._storage.create_exclusive(self._path(generation), record.model_dump_json().encode()):
                    self._took(record, current)
                    return record
            raise self._busy(self.current())

    def renew(self) -> None:
        """Push the expiry back; :class:`LeaseLost` if another holder took the lease meanwhile."""
        with self._lock:
            if self._record is None:
                return
            if self._lost is None:
                newest = self._newest_generation()
                if newest != self._record.generation:
                    self._lost = f"generation {newest} replaced ours ({self._record.generation})"
            if self._lost is not None:
                raise LeaseLost(
                    f"The lease on {self._dir} was taken over by another process ({self._lost}) while this one "
                    f"stalled for more than checkpoints.lease_timeout_s ({self.timeout.total_seconds():g} s): "
                    "stopping before writing anything more. Raise the timeout if epochs stall this long."
                )
            self._write(self._record.model_copy(update={"expires_at": self._clock.now() + self.timeout}))

    def check_fence(self, action: str) -> None:
        """The fence (:mod:`epochal.state.fence`): the lease's generation is the token. While this lease is held,
        raise :class:`FencedError` before ``action`` if a newer generation exists (one listing of the lease folder,
        no Spark). A no-op when the lease is not held (nothing is fenced outside a hold)."""
        record = self._record
        if record is None:
            return
        newest = self._newest_generation()
        if newest == record.generation:
            return
        self._lost = self._lost or f"generation {newest} replaced ours ({record.generation})"
        newer = self.current() if newest is not None else None
        by = newer.describe() if newer is not None else "nobody: the lease files are gone"
        raise FencedError(
            f"fenced: refusing to {action} on deployment {self._storage.base_url}: this process's lease "
            f"(generation {record.generation}, holder {record.holder}) was taken over while it stalled for more than "
            f"checkpoints.lease_timeout_s ({self.timeout.total_seconds():g} s); the lease is now generation "
            f"{newest}, {by}. Stopped before the write: this process writes nothing more to the deployment.",
            action="raise checkpoints.lease_timeout_s if processes stall this long",
            checkpoints=self._storage.base_url, generation=record.generation, newest_generation=newest,
        )

    def release(self) -> None:
        """Give the lease back (idempotent); a lost lease is left to its new holder."""
        self._stop_heartbeat()  # outside the lock: the heartbeat may be waiting for it
        with self._lock:
            record, self._record, self._depth = self._record, None, 0
            if record is None or self._lost is not None or self._newest_generation() != record.generation:
                return
            self._write(record.model_copy(update={"released": True, "expires_at": self._clock.now()}))

    def current(self) -> LeaseRecord | None:
        """The newest generation's record (None if the lease was never taken)."""
        for _ in range(5):
            generation = self._newest_generation()
            if generation is None:
                return None
            try:
                return LeaseRecord.model_validate_json(self._storage.read(self._path(generation)))
            except CheckpointNotFound:  # deleted by a new holder between the listing and the read
                continue
            except ValidationError:  # being written, or its writer died while creating it
                return self._unreadable(generation)
        raise ConcurrentRunError(f"the lease files under {self._dir} keep changing: another process is taking it")

    # ------------------------------------------------------------------------------ internals

    def _live(self, record: LeaseRecord) -> bool:
        if record.released or record.expires_at <= self._clock.now():
            return False
        return record.host != self._host or process_alive(record.pid)

    def _busy(self, record: LeaseRecord | None) -> ConcurrentRunError:
        who = record.describe() if record is not None else "another process"
        return ConcurrentRunError(
            f"another epochal process holds the lease on this deployment ({self._dir}): {who}. "
            "Wait for it to finish; if it crashed, its lease expires after checkpoints.lease_timeout_s "
            f"({self.timeout.total_seconds():g} s) or as soon as its process is gone (same host)."
        )

    def _new_record(self, generation: int, command: str) -> LeaseRecord:
        now = self._clock.now()
        return LeaseRecord(
            generation=generation, holder=self.holder, command=command, pid=self._pid, host=self._host,
            acquired_at=now, expires_at=now + self.timeout,
        )

    def _took(self, record: LeaseRecord, previous: LeaseRecord | None) -> None:
        if previous is not None and not previous.released:
            why = "expired" if previous.expires_at <= record.acquired_at else "its process is gone"
            log.warning("taking over the stale lease on %s (%s): %s", self._dir, why, previous.describe())
            if previous.host == self._host and previous.pid is not None and not process_alive(previous.pid):
                stop_orphans(previous.pid)
        self._record, self._lost = record, None
        for name in self._storage.list_names(self._dir):
            stem = name.removesuffix(".json")
            if stem.isdigit() and int(stem) < record.generation:
                self._storage.delete_tree(self._path(int(stem)))
        self._start_heartbeat()

    def _write(self, record: LeaseRecord) -> None:
        self._storage.write_atomic(self._path(record.generation), record.model_dump_json().encode())
        self._record = None if record.released else record

    def _newest_generation(self) -> int | None:
        stems = (name.removesuffix(".json") for name in self._storage.list_names(self._dir))
        return max((int(s) for s in stems if s.isdigit()), default=None)

    def _path(self, generation: int) -> str:
        return f"{self._dir}/{generation:012d}.json"

    def _unreadable(self, generation: int) -> LeaseRecord:
        """A generation file that is not a record: held from its last write for one timeout."""
        written = self._storage.modified_at(self._path(generation)) or self._clock.now()
        return LeaseRecord(
            generation=generation, holder=f"unknown (unreadable {self._path(generation)})", command="?",
            pid=None, host="?", acquired_at=written, expires_at=written + self.timeout,
        )

    # ------------------------------------------------------------------------------ heartbeat

    def _start_heartbeat(self) -> None:
        if not self._heartbeat_enabled:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(self._stop,), name="epochal-lease", daemon=True)
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _beat(self, stop: threading.Event) -> None:
        interval = self.timeout.total_seconds() / 3
        while not stop.wait(interval):
            try:
                self.renew()
            except LeaseLost as exc:
                log.error("%s", exc)
                return
            except Exception:  # noqa: BLE001 - a failed renewal is retried at the next beat or epoch
                log.warning("renewing the lease on %s failed", self._dir, exc_info=True)


def leased(command: str) -> Callable[[_F], _F]:
    """Decorate a method of an object with ``.d.lease`` (the epoch runner): it runs holding the lease."""

    def wrap(method: _F) -> _F:
        @functools.wraps(method)
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.d.lease.hold(command):
                return method(self, *args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap
