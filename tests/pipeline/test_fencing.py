"""Fenced writers: a process that lost its lease cannot complete a checkpoint or write a sink afterwards.

The lease's generation is the fencing token: before the completion commit, each sink write,
state write and run-position write, the writer checks that no newer generation exists.
The fast tests check the fence without Spark; the slow one stalls a real run (SIGSTOP at a
named point, ``EPOCHAL_PAUSE_AT``) past its lease's expiry, lets a second run take over and
finish, then resumes the first: it must stop with the fencing error and change nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from pyspark.sql import types as T

import tests.support.toy_pipeline as toy
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.lease import DeploymentLease, FencedError, LeaseLost
from epochal.pipeline.progress import ProgressStore
from epochal.pipeline.sinks import DeltaSink
from epochal.pipeline.stage import SinkMode, SinkSpec
from epochal.state.checkpoint.clock import ManualClock, SystemClock
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.checkpoint.ids import InMemoryIdCounter
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.testing import make_handle
from epochal.state.errors import WriterFenced
from tests.support.paths import child_env

TIMEOUT = 60


@pytest.fixture()
def storage(tmp_path) -> CheckpointStorage:
    return CheckpointStorage(str(tmp_path / "checkpoints"))


def _taken_over(storage: CheckpointStorage) -> tuple[DeploymentLease, DeploymentLease]:
    """A lease that stalled past its expiry (``stalled``) and the one that took it over (``newer``)."""
    clock = ManualClock()
    stalled = DeploymentLease(storage, TIMEOUT, clock, heartbeat=False, host="elsewhere")
    newer = DeploymentLease(storage, TIMEOUT, clock, heartbeat=False)
    stalled.acquire("run")
    stalled.check_fence("write sink totals (epoch 1)")  # the holder itself passes
    clock.advance(TIMEOUT + 1)
    newer.acquire("run")
    return stalled, newer


def test_the_fence_refuses_a_taken_over_holder_naming_the_deployment_the_generations_and_the_new_holder(storage):
    stalled, newer = _taken_over(storage)
    newer.check_fence("write sink totals (epoch 1)")
    with pytest.raises(FencedError) as fenced:
        stalled.check_fence("write sink totals (epoch 1)")
    error, text = fenced.value, str(fenced.value)
    assert isinstance(error, LeaseLost) and isinstance(error, PipelineError) and isinstance(error, WriterFenced)
    assert "refusing to write sink totals (epoch 1)" in text and storage.base_url in text
    assert "generation 1" in text and "generation 2" in text and newer.holder in text and stalled.holder in text
    assert "writes nothing more" in text and "lease_timeout_s (60 s)" in text
    assert error.context["generation"] == 1 and error.context["newest_generation"] == 2
    with pytest.raises(LeaseLost):  # the next renewal agrees: the lease is lost for good
        stalled.renew()
    newer.release()  # the newest generation is released, still newer than the stalled one's
    with pytest.raises(FencedError):
        stalled.check_fence("complete checkpoint 3")


def test_no_fence_outside_a_hold(storage):
    lease = DeploymentLease(storage, TIMEOUT, ManualClock(), heartbeat=False)
    lease.check_fence("write the run position")  # never held: nothing to check
    with lease.hold("run"):
        lease.check_fence("write the run position")
    lease.check_fence("write the run position")


def _coordinator(storage: CheckpointStorage, fence) -> CheckpointCoordinator:
    return CheckpointCoordinator(
        storage=storage, store=InMemoryCompletedCheckpointStore(2), clock=ManualClock(),
        id_counter=InMemoryIdCounter(), policy=CoordinatorPolicy(timeout_s=600), fence=fence,
    )


@pytest.mark.parametrize("fenced_call", [1, 2], ids=["before-metadata", "before-commit"])
def test_a_fenced_completion_commits_nothing_and_neither_aborts_nor_counts_a_failure(storage, fenced_call):
    stalled, _ = _taken_over(storage)
    calls: list[str] = []

    def fence(action: str) -> None:
        calls.append(action)
        if len(calls) == fenced_call:
            stalled.check_fence(action)

    coordinator = _coordinator(storage, fence)
    pending = coordinator.trigger(0, ("a",), {"files": 0}).pending
    coordinator.acknowledge(pending.checkpoint_id, "a", 0, [make_handle("a")], complete_when_acknowledged=False)
    with pytest.raises(FencedError, match=f"refusing to complete checkpoint {int(pending.checkpoint_id)}"):
        coordinator.complete(pending.checkpoint_id)
    assert coordinator.store.all() == [], "nothing committed"
    assert storage.exists(pending.spec.metadata_path) == (fenced_call == 2), "fenced before _metadata: not written"
    assert coordinator.failures.consecutive_failures == 0 and coordinator.pipeline_failure is None
    assert coordinator.get_pending(pending.checkpoint_id) is not None, "left pending: the new holder's to discard"
    assert calls == [f"complete checkpoint {int(pending.checkpoint_id)}"] * fenced_call


def test_sink_writes_rewinds_and_run_position_writes_are_fenced_before_touching_anything(tmp_path, storage):
    stalled, _ = _taken_over(storage)
    schema = T.StructType([T.StructField("key", T.StringType())])
    sink = DeltaSink(None, str(tmp_path / "warehouse"), SinkSpec("totals", "sum.totals", SinkMode.APPEND, schema),
                     stalled.check_fence)  # no Spark: the fence comes first
    with pytest.raises(FencedError, match=r"refusing to write sink totals \(epoch 4\)"):
        sink.write(None, 4)
    with pytest.raises(FencedError, match="refusing to rewind sink totals"):
        sink.rewind(3)
    progress = ProgressStore(storage, stalled.check_fence)
    with pytest.raises(FencedError, match="refusing to write the run position"):
        progress.start(5)
    assert not (tmp_path / "warehouse").exists() and not progress.exists()


# -- a real process, stalled past its lease and resumed ---------------------------------------------------------

HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)], [("a", 100), ("d", 7)]]  # a stale epoch 1 would show
TO = "2026-11-01-02:00"
LEASE_TIMEOUT_S = 3


def _deploy(root: Path, landing: Path) -> Path:
    config = {
        "pipeline": "toy",
        "landing": str(landing),
        "warehouse": str(root / "warehouse"),
        "checkpoints": {"dir": str(root / "checkpoints"), "retain": 2, "interval_epochs": 1,
                        "lease_timeout_s": LEASE_TIMEOUT_S},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16, "shuffle_partitions": 2},
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _wait_until(condition, what: str, process: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"run A exited ({process.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"T"


def _written(deployment) -> dict:
    """What the deployment holds: its checkpoints, run position, sinks and state."""
    rows = {name: sorted(tuple(r) for r in sink.read().collect()) for name, sink in deployment.sinks.items()}
    state = {name: sorted(tuple(r) for r in backend.values(toy.TOTAL).select("key", "value").collect())
             for name, backend in deployment.keyed.items() if name == "sum"}
    checkpoints = sorted((int(c.checkpoint_id), int(c.metadata.epoch)) for c in deployment.coordinator.store.all())
    return {"sinks": rows, "state": state, "checkpoints": checkpoints, "progress": deployment.progress.load()}


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("pause_at", "refused"), [
    ("in_sink:1", "refusing to write sink totals (epoch 1)"),
    ("after_metadata:1", "refusing to complete checkpoint"),
], ids=["before-a-sink-write", "before-the-completion-commit"])
def test_a_run_stalled_past_its_lease_is_fenced_after_another_run_took_over(
    spark, tmp_path, toy_registered, caplog, pause_at, refused,
):
    from epochal.config import load_settings
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    landing = tmp_path / "landing"
    for hour, rows in enumerate(HOURS):
        toy.write_hour(landing, hour, rows)
    straight = EpochRunner(build_deployment(load_settings(_deploy(tmp_path / "straight", landing)), spark))
    straight.run(to=TO)
    config = _deploy(tmp_path / "fenced", landing)
    env = child_env({k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_")})
    env["EPOCHAL_PAUSE_AT"] = pause_at
    with open(tmp_path / "a.out", "w") as out, open(tmp_path / "a.err", "w") as err:
        first = subprocess.Popen([sys.executable, "-m", toy.__name__, str(config), TO], env=env, stdout=out, stderr=err)
    try:
        _wait_until(lambda: _stopped(first.pid), f"it stopped itself at {pause_at}", first)
        watcher = DeploymentLease(CheckpointStorage(str(tmp_path / "fenced" / "checkpoints")), LEASE_TIMEOUT_S,
                                  SystemClock(), heartbeat=False)
        stalled = watcher.current()
        assert stalled is not None and stalled.pid == first.pid and not stalled.released
        _wait_until(lambda: watcher.current().expires_at <= datetime.now(timezone.utc), "its lease expired", first)
        second = EpochRunner(build_deployment(load_settings(config), spark))
        with caplog.at_level("WARNING", logger="epochal.lease"):
            second.run(to=TO)  # takes the stale lease over, recovers the epoch A was in, runs to the end
        assert any("taking over the stale lease" in r.getMessage() and stalled.holder in r.getMessage()
                   for r in caplog.records)
        after_b = _written(second.d)
        assert after_b["sinks"] == _written(straight.d)["sinks"] and after_b["state"] == _written(straight.d)["state"]
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait(timeout=600) != 0
    afterwards = build_deployment(load_settings(config), spark)  # reads everything afresh
    assert _written(afterwards) == after_b, "the fenced run changed nothing: checkpoints, position, sinks, state"
    assert afterwards.coordinator.failures.consecutive_failures == 0, "the fenced run counted no checkpoint failure"
    stderr = (tmp_path / "a.err").read_text()
    assert "FencedError" in stderr and refused in stderr, stderr[-3000:]
    assert f"generation {stalled.generation}" in stderr and second.d.lease.holder in stderr, stderr[-3000:]
    newest = watcher.current()
    assert newest.holder == second.d.lease.holder and newest.released
