"""The deployment lease: exclusive, re-entrant, expiring, taken over from dead holders, safe across processes."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from epochal.pipeline.errors import ConcurrentRunError
from epochal.pipeline.lease import DeploymentLease, LeaseLost, process_alive
from epochal.state.checkpoint.clock import ManualClock, SystemClock
from epochal.state.checkpoint.storage import CheckpointStorage

TIMEOUT = 60


def _lease(storage, clock, **kwargs) -> DeploymentLease:
    return DeploymentLease(storage, TIMEOUT, clock, heartbeat=False, **kwargs)


@pytest.fixture()
def storage(tmp_path) -> CheckpointStorage:
    return CheckpointStorage(str(tmp_path / "checkpoints"))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_one_holder_at_a_time_and_the_error_names_it(storage) -> None:
    clock = ManualClock()
    first, second = _lease(storage, clock), _lease(storage, clock)
    with first.hold("run"):
        with pytest.raises(ConcurrentRunError) as busy:
            second.acquire("savepoint")
        text = str(busy.value)
        assert first.holder in text and "command 'run'" in text and storage.child("_lease") in text
        assert "lease_timeout_s (60 s)" in text
    with second.hold("savepoint") as record:  # released: free at once, no takeover warning
        assert record.holder == second.holder and record.generation == 2
    assert storage.list_names(storage.child("_lease")) == ["000000000002.json"], "older generations are deleted"


def test_hold_is_reentrant_and_nested_holds_renew(storage) -> None:
    clock = ManualClock()
    lease = _lease(storage, clock)
    with lease.hold("run") as outer:
        clock.advance(TIMEOUT - 1)
        with lease.hold("run"):
            assert lease.current().expires_at == clock.now() + timedelta(seconds=TIMEOUT)
        assert lease.held, "an inner hold does not release"
        clock.advance(TIMEOUT - 1)  # past the first expiry, not the renewed one
        with pytest.raises(ConcurrentRunError):
            _lease(storage, clock).acquire("run")
    assert not lease.held and lease.current().released and outer.generation == 1


def test_an_expired_lease_is_taken_over_with_a_warning_and_its_holder_stops(storage, caplog) -> None:
    clock = ManualClock()
    stalled, other = _lease(storage, clock, host="elsewhere"), _lease(storage, clock)
    stalled.acquire("run")
    clock.advance(TIMEOUT)
    with caplog.at_level(logging.WARNING, logger="epochal.lease"):
        other.acquire("run")
    assert any("taking over the stale lease" in r.message and "expired" in r.message and stalled.holder in r.message
               for r in caplog.records)
    with pytest.raises(LeaseLost, match="taken over by another process"):
        stalled.renew()
    stalled.release()  # leaves the new holder's lease alone
    assert other.current().holder == other.holder and not other.current().released


def test_a_dead_holder_on_this_host_frees_the_lease_at_once_not_on_another_host(storage) -> None:
    clock, dead = ManualClock(), _dead_pid()
    assert not process_alive(dead) and process_alive(None)
    _lease(storage, clock, pid=dead).acquire("run")
    _lease(storage, clock).acquire("run")  # same host, process gone: no waiting for the expiry
    remote = _lease(storage, clock, pid=dead, host="another-host")
    storage.write_atomic(storage.child("_lease", "000000000009.json"), b"")  # newest: an unreadable file
    with pytest.raises(ConcurrentRunError, match="unreadable"):
        remote.acquire("run")
    clock.advance(TIMEOUT + 1)  # the unreadable file is held for one timeout from its last write ...
    with pytest.raises(ConcurrentRunError):
        remote.acquire("run")  # ... of the real clock: the manual one is days behind the file's mtime
    unreadable = storage.child("_lease", "000000000009.json").removeprefix("file://")
    written = os.stat(unreadable).st_mtime - 10
    os.utime(unreadable, (written, written))  # its last write well over the next lease's timeout ago
    lease = DeploymentLease(storage, 0.001, SystemClock(), heartbeat=False)
    lease.acquire("run")
    assert lease.current().generation == 10


def test_the_heartbeat_renews_a_held_lease(storage) -> None:
    lease = DeploymentLease(storage, 0.6, SystemClock())
    with lease.hold("run") as record:
        deadline = time.monotonic() + 30
        while lease.current().expires_at == record.expires_at and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease.current().expires_at > record.expires_at
    assert lease.current().released


def _contend(url: str, barrier, results, release) -> None:
    lease = DeploymentLease(CheckpointStorage(url), TIMEOUT, SystemClock(), heartbeat=False)
    barrier.wait(timeout=60)
    try:
        lease.acquire("run")
    except ConcurrentRunError:
        results.put("refused")
        return
    results.put("held")
    release.wait(timeout=60)
    lease.release()


def test_processes_racing_for_the_lease_exactly_one_wins(tmp_path) -> None:
    context = multiprocessing.get_context("spawn")
    count = 4
    barrier, results, release = context.Barrier(count), context.Queue(), context.Event()
    url = str(tmp_path / "checkpoints")
    workers = [context.Process(target=_contend, args=(url, barrier, results, release)) for _ in range(count)]
    for worker in workers:
        worker.start()
    outcomes = sorted(results.get(timeout=120) for _ in workers)
    release.set()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert outcomes == ["held"] + ["refused"] * (count - 1)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the orphans through /proc")
def test_taking_over_from_a_dead_holder_stops_the_processes_it_left(storage, caplog) -> None:
    """A driver killed by SIGKILL leaves its Spark JVM running a few seconds (maybe in a Delta commit): the next
    holder on the host stops every process whose environment names the dead driver, and only those."""
    clock, dead = ManualClock(), _dead_pid()
    env = {**os.environ, "EPOCHAL_DRIVER_PID": str(dead)}
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 env={**os.environ, "EPOCHAL_DRIVER_PID": str(os.getpid())})
    try:
        _lease(storage, clock, pid=dead).acquire("run")
        with caplog.at_level(logging.WARNING, logger="epochal.lease"):
            _lease(storage, clock).acquire("run")
        assert orphan.wait(timeout=30) == -9, "the dead driver's process was stopped"
        assert bystander.poll() is None, "another driver's process was left alone"
        assert f"stopping process {orphan.pid}, left running by the dead driver {dead}" in caplog.text
    finally:
        for process in (orphan, bystander):
            process.kill()
            process.wait()


def test_the_driver_jvm_names_its_driver(spark) -> None:
    """The session's JVM inherited the variable that names this process (state/session.py)."""
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{jvm_pid}/environ", "rb") as handle:
        assert f"EPOCHAL_DRIVER_PID={os.getpid()}".encode() in handle.read().split(b"\0")
