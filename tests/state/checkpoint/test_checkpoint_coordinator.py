"""CheckpointCoordinator: trigger checks, acks, completion, expiry, abort, shutdown, savepoints, restore."""

from __future__ import annotations

import uuid

import pytest

from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.errors import (
    CheckpointNotFound,
    CheckpointStorageError,
    HookError,
    InvalidCheckpointRequest,
    InvalidSavepointName,
    SavepointAlreadyExists,
)
from epochal.state.checkpoint.failure import CheckpointFailureManager
from epochal.state.checkpoint.ids import InMemoryIdCounter
from epochal.state.checkpoint.metadata import CheckpointKind, deserialize
from epochal.state.checkpoint.pending import AckResult, PendingStatus
from epochal.state.checkpoint.reasons import CheckpointFailureReason as Reason
from epochal.state.checkpoint.stats import StatsStatus
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.testing import RecordingHook, make_handle

TASKS = ("dedupe", "sessions", "sink")


class Harness:
    """A coordinator on memory storage with a manual clock."""

    def __init__(self, *, retain: int = 2, tolerable: int = 10, hooks=(), id_counter=None, **policy) -> None:
        self.clock = ManualClock()
        self.storage = CheckpointStorage(f"memory://coord-{uuid.uuid4().hex}/chk")
        self.store = InMemoryCompletedCheckpointStore(retain)
        self.failures = CheckpointFailureManager(tolerable)
        self.hooks = hooks
        self.policy = CoordinatorPolicy(**{"timeout_s": 60.0, **policy})
        self.ids = id_counter or InMemoryIdCounter()
        self.coordinator = self.new_coordinator()

    def new_coordinator(self) -> CheckpointCoordinator:
        return CheckpointCoordinator(storage=self.storage, store=self.store, clock=self.clock, id_counter=self.ids,
                                     failures=self.failures, hooks=self.hooks, policy=self.policy)

    def trigger(self, epoch: int = 0, **kwargs):
        result = self.coordinator.trigger(epoch, TASKS, {"landing": epoch}, **kwargs)
        assert result.triggered, result.failure
        return result.pending

    def ack_all(self, pending, *, skip: tuple[str, ...] = ()):
        last = None
        for task in sorted(pending.spec.tasks):
            if task not in skip:
                handles = [] if task == "sink" else [make_handle(task, version=pending.epoch)]
                last = self.coordinator.acknowledge(pending.checkpoint_id, task, pending.epoch, handles)
        return last

    def complete(self, epoch: int = 0):
        ack = self.ack_all(self.trigger(epoch))
        assert ack.completion.succeeded, ack.completion.failure
        return ack.completion


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_trigger_names_every_task_and_its_location(h: Harness) -> None:
    pending = h.trigger(4)
    assert (pending.checkpoint_id, pending.epoch, pending.spec.tasks) == (1, 4, frozenset(TASKS))
    assert pending.spec.location == h.storage.checkpoint_dir(1)
    assert pending.spec.metadata_path == h.storage.metadata_path(1)
    assert (pending.spec.deadline - pending.spec.triggered_at).total_seconds() == 60
    assert h.coordinator.pending_checkpoints() == [pending] and h.coordinator.get_pending(1) is pending


def test_completion_writes_metadata_then_commits(h: Harness) -> None:
    pending = h.trigger(4)
    h.clock.advance(2)
    ack = h.ack_all(pending)
    assert ack.result is AckResult.SUCCESS and ack.completion.succeeded
    completed = ack.completion.completed
    assert h.store.latest() == completed and completed.metadata_path == h.storage.metadata_path(1)
    meta = deserialize(h.storage.read(completed.metadata_path), path=completed.metadata_path)
    assert meta == completed.metadata
    assert (meta.epoch, meta.source_positions, meta.duration_s) == (4, {"landing": 4}, 2.0)
    assert [h_.key for h_ in meta.handles] == ["dedupe/s", "sessions/s"]
    assert pending.status is PendingStatus.COMPLETED and h.coordinator.pending_checkpoints() == []
    stats = h.coordinator.stats.get(1)
    assert stats.status is StatsStatus.COMPLETED and set(stats.ack_latency_s) == set(TASKS)


def test_retain_n_returns_subsumed_checkpoints(h: Harness) -> None:
    assert [h.complete(e).subsumed for e in range(2)] == [(), ()]
    third = h.complete(2)
    assert [c.checkpoint_id for c in third.subsumed] == [1]
    assert [c.checkpoint_id for c in h.store.all()] == [2, 3]
    assert [c.checkpoint_id for c in h.store.awaiting_release()] == [1]


def test_ack_results(h: Harness) -> None:
    pending = h.trigger(5)
    ack = h.coordinator.acknowledge
    assert ack(1, "dedupe", 5).result is AckResult.SUCCESS
    assert ack(1, "dedupe", 5).result is AckResult.DUPLICATE
    assert ack(1, "stranger", 5).result is AckResult.UNKNOWN
    assert ack(99, "dedupe", 5).result is AckResult.UNKNOWN
    assert ack(1, "sessions", 6).result is AckResult.EPOCH_MISMATCH
    assert pending.not_yet_acknowledged == {"sessions", "sink"}
    h.coordinator.abort(1, Reason.TASK_FAILURE, "sessions crashed")
    assert ack(1, "sessions", 5).result is AckResult.DISCARDED


def test_ack_needs_state_handles(h: Harness) -> None:
    h.trigger()
    with pytest.raises(InvalidCheckpointRequest, match="carries StateHandle objects only"):
        h.coordinator.acknowledge(1, "dedupe", 0, [{"stage": "x"}])


def test_too_many_concurrent_checkpoints() -> None:
    h = Harness(max_concurrent=2)
    h.trigger(0), h.trigger(1)
    declined = h.coordinator.trigger(2, TASKS)
    assert not declined.triggered and declined.reason is Reason.TOO_MANY_CONCURRENT_CHECKPOINTS
    assert declined.failure.detail == "2 pending, at most 2" and declined.checkpoint_id is None
    assert h.coordinator.trigger_savepoint(2, TASKS).triggered, "savepoints are not limited"
    assert h.coordinator.stats.declined_counts() == {Reason.TOO_MANY_CONCURRENT_CHECKPOINTS: 1}


def test_minimum_pause_since_last_completion() -> None:
    h = Harness(min_pause_s=30)
    h.complete(0)
    h.clock.advance(29)
    assert h.coordinator.trigger(1, TASKS).reason is Reason.MINIMUM_TIME_BETWEEN_CHECKPOINTS
    h.clock.advance(1)
    assert h.coordinator.trigger(1, TASKS).triggered


def test_minimum_pause_is_known_to_a_new_coordinator() -> None:
    h = Harness(min_pause_s=30)
    h.complete(0)
    fresh = h.new_coordinator()
    assert fresh.trigger(1, TASKS).reason is Reason.MINIMUM_TIME_BETWEEN_CHECKPOINTS


def test_not_all_required_tasks_running(h: Harness) -> None:
    declined = h.coordinator.trigger(0, TASKS, running_tasks=["dedupe", "sink"])
    assert declined.reason is Reason.NOT_ALL_REQUIRED_TASKS_RUNNING
    assert declined.failure.detail == "not running: ['sessions']"
    assert h.coordinator.trigger(0, TASKS, running_tasks=[*TASKS, "extra"]).triggered


def test_malformed_triggers_raise(h: Harness) -> None:
    with pytest.raises(InvalidCheckpointRequest, match="needs at least one task"):
        h.coordinator.trigger(0, [])
    with pytest.raises(InvalidCheckpointRequest, match="An epoch is >= 0, not -1"):
        h.coordinator.trigger(-1, TASKS)
    with pytest.raises(InvalidCheckpointRequest, match="source_positions must be plain JSON"):
        h.coordinator.trigger(0, TASKS, {"files": {"a", "b"}})
    with pytest.raises(InvalidCheckpointRequest, match="savepoint_name is only for savepoints"):
        h.coordinator.trigger(0, TASKS, savepoint_name="x")
    with pytest.raises(InvalidCheckpointRequest, match="max_parallelism is >= 1, not 0"):
        h.coordinator.trigger(0, TASKS, max_parallelism=0)
    with pytest.raises(InvalidSavepointName):
        h.coordinator.trigger_savepoint(0, TASKS, name="../escape")
    assert h.coordinator.pending_checkpoints() == []


def test_expiry_after_timeout(h: Harness) -> None:
    pending = h.trigger()
    h.coordinator.acknowledge(1, "dedupe", 0)
    h.clock.advance(59)
    assert h.coordinator.expire_overdue() == []
    h.clock.advance(1)
    assert h.coordinator.expire_overdue() == [1]
    assert pending.status is PendingStatus.EXPIRED
    assert pending.failure.detail == "waiting for ['sessions', 'sink'] after 60.0s"
    assert h.coordinator.acknowledge(1, "sessions", 0).result is AckResult.DISCARDED
    assert h.coordinator.stats.get(1).failure_reason is Reason.CHECKPOINT_EXPIRED


def test_acks_and_triggers_expire_overdue_checkpoints_first(h: Harness) -> None:
    pending = h.trigger()
    h.clock.advance(61)
    assert h.coordinator.acknowledge(1, "dedupe", 0).result is AckResult.DISCARDED
    assert pending.status is PendingStatus.EXPIRED
    assert h.coordinator.trigger(1, TASKS).triggered, "the expired one no longer counts as pending"


def test_abort(h: Harness) -> None:
    h.trigger()
    assert h.coordinator.abort(1, Reason.TASK_FAILURE, "boom") is True
    assert h.coordinator.abort(1, Reason.TASK_FAILURE) is False
    assert h.coordinator.abort(42, Reason.TASK_FAILURE) is False
    with pytest.raises(InvalidCheckpointRequest, match="MINIMUM_TIME_BETWEEN_CHECKPOINTS is a pre-flight decline reason"):
        h.coordinator.abort(1, Reason.MINIMUM_TIME_BETWEEN_CHECKPOINTS)
    assert h.store.latest() is None


def test_tolerable_failures_then_pipeline_failed() -> None:
    h = Harness(tolerable=1, max_concurrent=3)
    h.trigger(0)
    h.coordinator.abort(1, Reason.CHECKPOINT_EXPIRED)
    h.trigger(1), h.trigger(2)
    h.coordinator.abort(2, Reason.CHECKPOINT_DECLINED, "sink said no")
    error = h.coordinator.pipeline_failure
    assert error is not None and "2 consecutive checkpoint failures (tolerable: 1)" in str(error)
    assert h.coordinator.get_pending(3) is None, "pending checkpoints are aborted when the pipeline fails"
    declined = h.coordinator.trigger(3, TASKS)
    assert declined.reason is Reason.PIPELINE_FAILED and "sink said no" in declined.failure.detail
    h.failures.reset()
    assert h.coordinator.trigger(3, TASKS).triggered


def test_success_resets_the_failure_count() -> None:
    h = Harness(tolerable=1)
    h.trigger(0)
    h.coordinator.abort(1, Reason.CHECKPOINT_EXPIRED)
    h.complete(1)
    h.trigger(2)
    h.coordinator.abort(3, Reason.CHECKPOINT_EXPIRED)
    assert h.coordinator.pipeline_failure is None


def test_shutdown(h: Harness) -> None:
    pending = h.trigger()
    h.coordinator.shutdown()
    assert pending.status is PendingStatus.ABORTED
    assert pending.failure.reason is Reason.CHECKPOINT_ABORTED_ON_SHUTDOWN
    assert h.coordinator.trigger(1, TASKS).reason is Reason.COORDINATOR_SHUTDOWN
    assert h.coordinator.acknowledge(1, "dedupe", 0).result is AckResult.DISCARDED
    assert h.coordinator.pipeline_failure is None, "a shutdown is not a failure"


def test_completion_subsumes_older_pending_checkpoints() -> None:
    h = Harness(max_concurrent=3)
    older, savepoint, newer = h.trigger(0), h.coordinator.trigger_savepoint(0, TASKS).pending, h.trigger(1)
    h.ack_all(newer)
    assert older.status is PendingStatus.ABORTED and older.failure.reason is Reason.CHECKPOINT_SUBSUMED
    assert savepoint.status is PendingStatus.PENDING, "pending savepoints are not subsumed"
    assert h.ack_all(savepoint).completion.succeeded
    assert h.store.latest().checkpoint_id == 3 and h.coordinator.pipeline_failure is None


def test_savepoint_lives_under_savepoints_and_is_never_subsumed(h: Harness) -> None:
    result = h.coordinator.trigger_savepoint(3, TASKS, name="before-upgrade")
    pending = result.pending
    assert pending.spec.location == h.storage.savepoint_dir("before-upgrade")
    completed = h.ack_all(pending).completion.completed
    assert completed.metadata_path == h.storage.savepoint_metadata_path("before-upgrade")
    assert completed.is_savepoint and completed.metadata.mode.value == "full"
    for epoch in range(4, 8):
        h.complete(epoch)
    assert [c.checkpoint_id for c in h.store.all()] == [1, 4, 5]
    assert h.coordinator.resolve("before-upgrade") == completed
    assert h.coordinator.resolve(h.storage.savepoint_dir("before-upgrade")) == completed
    with pytest.raises(SavepointAlreadyExists, match="A savepoint named 'before-upgrade' already exists"):
        h.coordinator.trigger_savepoint(9, TASKS, name="before-upgrade")


def test_default_savepoint_name(h: Harness) -> None:
    pending = h.coordinator.trigger_savepoint(0, TASKS).pending
    assert pending.spec.savepoint_name == "savepoint-1"
    assert h.coordinator.trigger_savepoint(0, TASKS, name="x").triggered
    with pytest.raises(SavepointAlreadyExists):
        h.coordinator.trigger_savepoint(0, TASKS, name="x")


def test_duplicate_handles_fail_finalisation(h: Harness) -> None:
    pending = h.trigger()
    h.coordinator.acknowledge(1, "dedupe", 0, [make_handle("shared")])
    h.coordinator.acknowledge(1, "sessions", 0, [make_handle("shared")])
    completion = h.coordinator.acknowledge(1, "sink", 0).completion
    assert not completion.succeeded and completion.failure.reason is Reason.FINALIZE_FAILED
    assert "several handles for the same state: shared/s" in completion.failure.detail
    assert pending.status is PendingStatus.ABORTED and h.store.latest() is None


def test_id_allocation_failure_is_an_io_decline() -> None:
    class BrokenCounter:
        def next_id(self):
            raise CheckpointStorageError("disk gone")

        def last_id(self):
            return None

    h = Harness(id_counter=BrokenCounter(), tolerable=5)
    declined = h.coordinator.trigger(0, TASKS)
    assert declined.reason is Reason.IO_EXCEPTION and "disk gone" in declined.failure.detail
    assert h.failures.consecutive_failures == 1


def test_hooks_on_trigger_and_restore() -> None:
    hook = RecordingHook("offsets", {"partition-0": 17})
    h = Harness(hooks=[hook])
    completed = h.complete(3).completed
    assert hook.triggered == [(1, 3)]
    assert completed.metadata.hook_states == {"offsets": {"partition-0": 17}}
    fresh = h.new_coordinator()
    assert fresh.restore() == completed
    assert hook.restored == [(1, {"partition-0": 17})]


def test_failing_trigger_hook_fails_the_checkpoint() -> None:
    h = Harness(hooks=[RecordingHook("bad", fail_on="trigger")])
    result = h.coordinator.trigger(0, TASKS)
    assert not result.triggered and result.reason is Reason.TRIGGER_HOOK_FAILED
    assert result.checkpoint_id == 1 and "Master hook 'bad' failed on trigger" in result.failure.detail
    assert h.coordinator.stats.get(1).status is StatsStatus.FAILED
    assert h.coordinator.acknowledge(1, "dedupe", 0).result is AckResult.DISCARDED


def test_restore_picks_latest_or_pointer(h: Harness) -> None:
    assert h.coordinator.restore() is None, "nothing completed yet: start empty"
    for epoch in range(3):
        h.complete(epoch)
    assert h.coordinator.restore().checkpoint_id == 3
    assert h.coordinator.restore(2).checkpoint_id == 2
    assert h.coordinator.restore("chk-3").epoch == 2
    with pytest.raises(CheckpointNotFound, match=r"Checkpoint 1 \(.*chk-1/_metadata\) is subsumed: it is no longer retained"):
        h.coordinator.restore(1)
    with pytest.raises(CheckpointNotFound, match=r"Checkpoint 9 \(.*chk-9/_metadata\) is not in the completed-checkpoint store: "
                                                 r"no checkpoint 9 was completed yet \(the newest retained is 3\)"):
        h.coordinator.restore(9)


def test_restore_with_pending_checkpoints_is_refused(h: Harness) -> None:
    h.trigger()
    with pytest.raises(InvalidCheckpointRequest, match=r"Cannot restore with pending checkpoints \[1\]"):
        h.coordinator.restore()


def test_restore_hook_state_without_hook() -> None:
    h = Harness(hooks=[RecordingHook("offsets", 1)])
    h.complete()
    h.hooks = ()
    fresh = h.new_coordinator()
    with pytest.raises(HookError, match="not registered"):
        fresh.restore()
    assert fresh.restore(allow_non_restored_state=True).checkpoint_id == 1


def test_foreign_checkpoint_is_read_from_its_metadata(h: Harness) -> None:
    h.complete(6)
    other = Harness()
    external = other.coordinator.resolve(h.storage.checkpoint_dir(1))
    assert external.status.value == "external" and external.epoch == 6
    assert external.metadata == h.store.latest().metadata


def test_savepoints_kind_filter(h: Harness) -> None:
    h.complete(0)
    h.ack_all(h.coordinator.trigger_savepoint(1, TASKS).pending)
    assert h.store.latest().kind is CheckpointKind.SAVEPOINT
    assert h.store.latest(CheckpointKind.CHECKPOINT).checkpoint_id == 1
