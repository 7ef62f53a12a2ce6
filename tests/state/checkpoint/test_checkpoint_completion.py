"""Completion interrupted at every step: the previous checkpoint stays the latest, the store is never broken.

A crash (``SimulatedCrash``, a BaseException no engine code catches) stands for
the process dying; a restart is a new coordinator over the same durable parts
(storage, store, id counter, failure state).
"""

from __future__ import annotations

import uuid

import pytest

from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.errors import CheckpointNotFound, CheckpointStorageError
from epochal.state.checkpoint.failure import CheckpointFailureManager, StorageFailureStateRepository
from epochal.state.checkpoint.ids import FileIdCounter
from epochal.state.checkpoint.metadata import deserialize
from epochal.state.checkpoint.reasons import CheckpointFailureReason as Reason
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.stats import CheckpointStatsTracker, JsonLinesStatsHistory
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.testing import FailingStorage, FailingStore, SimulatedCrash, make_handle

TASKS = ("a", "b")
STEPS = ("_finalize_metadata", "_write_metadata", "_commit", "_after_commit")
# every step, crashed just before it runs and just after it returns
CRASH_POINTS = [(step, when) for step in STEPS for when in ("before", "after")]


class Durable:
    """What survives a crash: storage, store, ids, failure state, stats history."""

    def __init__(self, base_url: str, storage: CheckpointStorage | None = None, store=None) -> None:
        self.storage = storage or CheckpointStorage(base_url)
        self.store = store or InMemoryCompletedCheckpointStore(max_retained=2)
        self.clock = ManualClock()

    def coordinator(self) -> CheckpointCoordinator:
        storage = self.storage
        return CheckpointCoordinator(
            storage=storage, store=self.store, clock=self.clock, id_counter=FileIdCounter(storage.ids_url),
            stats=CheckpointStatsTracker(JsonLinesStatsHistory(storage)),
            failures=CheckpointFailureManager(3, StorageFailureStateRepository(storage)),
            policy=CoordinatorPolicy(timeout_s=60),
        )


def run_epoch(coordinator: CheckpointCoordinator, epoch: int):
    pending = coordinator.trigger(epoch, TASKS, {"files": epoch}).pending
    coordinator.acknowledge(pending.checkpoint_id, "a", epoch, [make_handle("a", version=epoch)])
    return pending, coordinator.acknowledge(pending.checkpoint_id, "b", epoch, [make_handle("b", version=epoch)])


def assert_store_sound(durable: Durable) -> None:
    """Every retained entry points to a readable _metadata equal to what the store holds."""
    for entry in durable.store.all():
        on_disk = deserialize(durable.storage.read(entry.metadata_path), path=entry.metadata_path)
        assert on_disk == entry.metadata


def crash_at(monkeypatch, coordinator: CheckpointCoordinator, step: str, when: str) -> None:
    original = getattr(coordinator, step)

    def interrupted(*args, **kwargs):
        if when == "before":
            raise SimulatedCrash(step)
        original(*args, **kwargs)
        raise SimulatedCrash(step)

    monkeypatch.setattr(coordinator, step, interrupted)


@pytest.fixture(params=["memory", "local"])
def durable(request, tmp_path) -> Durable:
    return Durable(f"memory://completion-{uuid.uuid4().hex}/chk" if request.param == "memory" else str(tmp_path / "chk"))


@pytest.mark.parametrize(("step", "when"), CRASH_POINTS)
def test_crash_at_each_completion_step(durable: Durable, monkeypatch, step: str, when: str) -> None:
    first = durable.coordinator()
    run_epoch(first, 0)
    crash_at(monkeypatch, first, step, when)
    with pytest.raises(SimulatedCrash):
        run_epoch(first, 1)

    committed = STEPS.index(step) > STEPS.index("_commit") or (step, when) == ("_commit", "after")
    assert durable.store.latest().checkpoint_id == (2 if committed else 1)
    assert_store_sound(durable)

    restarted = durable.coordinator()
    if not committed:
        with pytest.raises(CheckpointNotFound, match=r"Checkpoint 2 .* is not in the completed-checkpoint store: no "
                                                      r"checkpoint 2 was completed yet \(the newest retained is 1\)"):
            restarted.resolve(2)
    restored = restarted.restore()
    assert restored.checkpoint_id == (2 if committed else 1)
    _, ack = run_epoch(restarted, restored.epoch + 1)
    assert ack.completion.completed.checkpoint_id == 3, "ids are never reused after a crash"
    if not committed:
        with pytest.raises(CheckpointNotFound, match="Checkpoint 2 .*: it failed, its completion was interrupted"):
            restarted.resolve(2)
    assert [c.checkpoint_id for c in durable.store.all()] == ([2, 3] if committed else [1, 3])
    assert_store_sound(durable)


def test_write_failure_aborts_with_finalize_failed(monkeypatch) -> None:
    base = f"memory://completion-{uuid.uuid4().hex}/chk"
    storage = FailingStorage(base)
    durable = Durable(base, storage=storage)
    coordinator = durable.coordinator()
    run_epoch(coordinator, 0)
    storage.fail_when = lambda path: path.endswith("chk-2/_metadata")
    pending, ack = run_epoch(coordinator, 1)
    assert ack.completion.failure.reason is Reason.FINALIZE_FAILED
    assert "injected write failure" in ack.completion.failure.detail
    assert durable.store.latest().checkpoint_id == 1 and not storage.exists(storage.metadata_path(2))
    assert coordinator.stats.get(2).failure_reason is Reason.FINALIZE_FAILED
    assert durable.coordinator().failures.consecutive_failures == 1, "the failure count is durable"


def test_store_failure_before_commit_leaves_an_uncommitted_folder() -> None:
    base = f"memory://completion-{uuid.uuid4().hex}/chk"
    store = FailingStore(InMemoryCompletedCheckpointStore(2))
    durable = Durable(base, store=store)
    coordinator = durable.coordinator()
    run_epoch(coordinator, 0)
    store.error = CheckpointStorageError("delta commit conflict")
    _, ack = run_epoch(coordinator, 1)
    assert ack.completion.failure.reason is Reason.FINALIZE_FAILED
    assert durable.storage.exists(durable.storage.metadata_path(2)), "files are never deleted by the coordinator"
    assert durable.store.latest().checkpoint_id == 1
    with pytest.raises(CheckpointNotFound, match=r"is not in the completed-checkpoint store: it failed at epoch 1 "
                                                 r"\(FINALIZE_FAILED: CheckpointStorageError: delta commit conflict\)"):
        coordinator.resolve("chk-2")
    coordinator.trigger(2, TASKS)  # checkpoint 3, pending: a stage writes a full copy into its folder
    durable.storage.write_atomic(durable.storage.child("chk-3", "dedupe.parquet"), b"x")
    resolver = CheckpointResolver(durable.storage, durable.store)
    assert [cid for cid, _ in resolver.uncommitted_dirs(pending_ids=[3])] == [2]
    assert [cid for cid, _ in resolver.uncommitted_dirs()] == [2, 3]


def test_store_failure_after_commit_never_breaks_the_store() -> None:
    """The commit happened but its caller saw an error (unknown outcome): the new latest is whole."""
    base = f"memory://completion-{uuid.uuid4().hex}/chk"
    store = FailingStore(InMemoryCompletedCheckpointStore(2), after_commit=True)
    durable = Durable(base, store=store)
    coordinator = durable.coordinator()
    run_epoch(coordinator, 0)
    store.error = OSError("connection reset after commit")
    _, ack = run_epoch(coordinator, 1)
    assert ack.completion.failure.reason is Reason.FINALIZE_FAILED
    assert durable.store.latest().checkpoint_id == 2
    assert_store_sound(durable)
    assert durable.coordinator().restore().checkpoint_id == 2
