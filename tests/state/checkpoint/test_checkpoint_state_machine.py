"""Hypothesis state machine over the coordinator, against a small model, with an injected clock.

Rules: trigger (checkpoint or savepoint, all tasks running or not), ack,
duplicate ack, unknown ack, late ack, wrong-epoch ack, clock advance, expiry,
abort, acknowledge-all (completion), operator reset, shutdown.
Invariants: ids strictly increasing, at most ``max_concurrent`` pending
checkpoints, the store retains exactly the newest N completed checkpoints
plus every savepoint, the latest is the newest completed and never an aborted
one, every retained entry's ``_metadata`` is readable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.checkpoint.failure import CheckpointFailureManager
from epochal.state.checkpoint.ids import InMemoryIdCounter
from epochal.state.checkpoint.metadata import CheckpointKind, deserialize
from epochal.state.checkpoint.pending import AckResult
from epochal.state.checkpoint.reasons import CheckpointFailureReason as Reason
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.testing import make_handle

TASKS = ("dedupe", "sessions", "sink")
MAX_CONCURRENT, RETAIN, TIMEOUT_S, MIN_PAUSE_S, TOLERABLE = 2, 2, 10.0, 1.0, 2


@dataclass
class ModelPending:
    checkpoint_id: int
    epoch: int
    savepoint: bool
    triggered_at: float
    acked: set[str] = field(default_factory=set)


@dataclass
class Model:
    now: float = 0.0
    next_id: int = 1
    pending: dict[int, ModelPending] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    completed_checkpoints: list[int] = field(default_factory=list)
    completed_savepoints: list[int] = field(default_factory=list)
    last_completion: float | None = None
    consecutive: int = 0
    failed: bool = False
    shut_down: bool = False

    def fail(self, checkpoint_id: int, counts: bool) -> None:
        self.pending.pop(checkpoint_id, None)
        self.finished.add(checkpoint_id)
        self.aborted.add(checkpoint_id)
        if counts and not self.failed:
            self.consecutive += 1
            if self.consecutive > TOLERABLE:
                self.failed = True
                for other in sorted(self.pending):
                    self.fail(other, counts=False)

    def expire(self) -> list[int]:
        overdue = [i for i in sorted(self.pending) if self.now >= self.pending[i].triggered_at + TIMEOUT_S]
        for checkpoint_id in overdue:
            if checkpoint_id in self.pending:
                self.fail(checkpoint_id, counts=True)
        return overdue

    def expected_decline(self, savepoint: bool, all_running: bool) -> Reason | None:
        if self.shut_down:
            return Reason.COORDINATOR_SHUTDOWN
        if self.failed:
            return Reason.PIPELINE_FAILED
        if not savepoint:
            if sum(1 for p in self.pending.values() if not p.savepoint) >= MAX_CONCURRENT:
                return Reason.TOO_MANY_CONCURRENT_CHECKPOINTS
            if self.last_completion is not None and self.now < self.last_completion + MIN_PAUSE_S:
                return Reason.MINIMUM_TIME_BETWEEN_CHECKPOINTS
        return None if all_running else Reason.NOT_ALL_REQUIRED_TASKS_RUNNING

    def complete(self, checkpoint_id: int) -> None:
        done = self.pending.pop(checkpoint_id)
        self.finished.add(checkpoint_id)
        self.last_completion = self.now
        if done.savepoint:
            self.completed_savepoints.append(checkpoint_id)
        else:
            self.completed_checkpoints.append(checkpoint_id)
            for older in [i for i, p in sorted(self.pending.items()) if i < checkpoint_id and not p.savepoint]:
                self.fail(older, counts=False)
        if not self.failed:
            self.consecutive = 0


class CoordinatorMachine(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.clock = ManualClock()
        self.storage = CheckpointStorage(f"memory://machine-{uuid.uuid4().hex}/chk")
        self.store = InMemoryCompletedCheckpointStore(RETAIN)
        self.failures = CheckpointFailureManager(TOLERABLE)
        self.coordinator = CheckpointCoordinator(
            storage=self.storage, store=self.store, clock=self.clock, id_counter=InMemoryIdCounter(),
            failures=self.failures,
            policy=CoordinatorPolicy(max_concurrent=MAX_CONCURRENT, min_pause_s=MIN_PAUSE_S, timeout_s=TIMEOUT_S),
        )
        self.model = Model()
        self.triggered_ids: list[int] = []

    # ------------------------------------------------------------- helpers
    def _pick(self, index: int) -> ModelPending:
        ids = sorted(self.model.pending)
        return self.model.pending[ids[index % len(ids)]]

    def _expire_both(self) -> None:
        """Expire in the model and the coordinator alike (a rule may then find nothing pending)."""
        expired = self.model.expire()
        assert self.coordinator.expire_overdue() == expired
        if expired:
            event("expired")

    def _ack(self, checkpoint_id: int, task: str, epoch: int, expected: AckResult) -> None:
        self.model.expire()
        ack = self.coordinator.acknowledge(checkpoint_id, task, epoch, [] if task == "sink" else [make_handle(task, version=epoch)])
        assert ack.result is expected, (checkpoint_id, task, ack)

    # --------------------------------------------------------------- rules
    @rule(epoch=st.integers(0, 5), savepoint=st.sampled_from([False] * 4 + [True]),
          all_running=st.sampled_from([True] * 4 + [False]))
    def trigger(self, epoch: int, savepoint: bool, all_running: bool) -> None:
        if self.model.expire():
            event("expired")
        expected = self.model.expected_decline(savepoint, all_running)
        running = TASKS if all_running else TASKS[:-1]
        kind = CheckpointKind.SAVEPOINT if savepoint else CheckpointKind.CHECKPOINT
        result = self.coordinator.trigger(epoch, TASKS, {"epoch": epoch}, running_tasks=running, kind=kind)
        assert result.reason is expected, (result.failure, expected)
        event(f"trigger: {expected.value if expected else 'started'}")
        if expected is None:
            checkpoint_id = int(result.checkpoint_id)
            assert checkpoint_id == self.model.next_id
            assert not self.triggered_ids or checkpoint_id > self.triggered_ids[-1]
            self.triggered_ids.append(checkpoint_id)
            self.model.next_id += 1
            self.model.pending[checkpoint_id] = ModelPending(checkpoint_id, epoch, savepoint, self.model.now)

    @precondition(lambda self: self.model.pending)
    @rule(index=st.integers(0, 10), task=st.sampled_from(TASKS))
    def ack(self, index: int, task: str) -> None:
        self._expire_both()
        if not self.model.pending:
            return
        target = self._pick(index)
        expected = AckResult.DUPLICATE if task in target.acked else AckResult.SUCCESS
        self._ack(target.checkpoint_id, task, target.epoch, expected)
        target.acked.add(task)
        if target.acked == set(TASKS):
            self.model.complete(target.checkpoint_id)
            event("completed a savepoint" if target.savepoint else "completed a checkpoint")

    @precondition(lambda self: self.model.pending)
    @rule(index=st.integers(0, 10))
    def acknowledge_all(self, index: int) -> None:
        self._expire_both()
        if not self.model.pending:
            return
        target = self._pick(index)
        for task in TASKS:
            if task not in target.acked:
                self.ack(sorted(self.model.pending).index(target.checkpoint_id), task)

    @rule(epoch=st.integers(0, 5))
    def run_epoch(self, epoch: int) -> None:
        """The common path: trigger a checkpoint and acknowledge it fully if it started."""
        before = set(self.model.pending)
        self.trigger(epoch, savepoint=False, all_running=True)
        started = set(self.model.pending) - before
        if started:
            self.acknowledge_all(sorted(self.model.pending).index(started.pop()))

    @precondition(lambda self: self.model.pending)
    @rule(index=st.integers(0, 10))
    def ack_unknown_task(self, index: int) -> None:
        self._expire_both()
        if self.model.pending:
            target = self._pick(index)
            self._ack(target.checkpoint_id, "not-a-task", target.epoch, AckResult.UNKNOWN)

    @precondition(lambda self: self.model.pending)
    @rule(index=st.integers(0, 10), task=st.sampled_from(TASKS))
    def ack_wrong_epoch(self, index: int, task: str) -> None:
        self._expire_both()
        if self.model.pending:
            target = self._pick(index)
            expected = AckResult.DUPLICATE if task in target.acked else AckResult.EPOCH_MISMATCH
            self._ack(target.checkpoint_id, task, target.epoch + 1, expected)

    @rule(offset=st.integers(1, 50))
    def ack_unknown_checkpoint(self, offset: int) -> None:
        self._ack(self.model.next_id + offset, "dedupe", 0, AckResult.UNKNOWN)

    @precondition(lambda self: self.model.finished)
    @rule(index=st.integers(0, 100), task=st.sampled_from(TASKS))
    def ack_late(self, index: int, task: str) -> None:
        finished = sorted(self.model.finished)
        self._ack(finished[index % len(finished)], task, 0, AckResult.DISCARDED)

    @rule(seconds=st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0, 9.99, 10.0, 15.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.model.now += seconds

    @rule()
    def expire_overdue(self) -> None:
        assert self.coordinator.expire_overdue() == self.model.expire()

    @precondition(lambda self: self.model.pending)
    @rule(index=st.integers(0, 10), reason=st.sampled_from([Reason.TASK_FAILURE, Reason.CHECKPOINT_DECLINED, Reason.CHECKPOINT_SUBSUMED]))
    def abort(self, index: int, reason: Reason) -> None:
        target = self._pick(index)
        assert self.coordinator.abort(target.checkpoint_id, reason, "by the machine") is True
        self.model.fail(target.checkpoint_id, counts=reason.counts)

    @precondition(lambda self: self.model.failed)
    @rule()
    def operator_reset(self) -> None:
        self.failures.reset()
        self.model.failed, self.model.consecutive = False, 0

    @precondition(lambda self: len(self.model.completed_checkpoints) >= 3 and not self.model.shut_down)
    @rule()
    def shutdown(self) -> None:
        self.coordinator.shutdown()
        self.model.shut_down = True
        for checkpoint_id in sorted(self.model.pending):
            self.model.fail(checkpoint_id, counts=False)

    # ---------------------------------------------------------- invariants
    @invariant()
    def pending_matches_the_model(self) -> None:
        assert [p.checkpoint_id for p in self.coordinator.pending_checkpoints()] == sorted(self.model.pending)
        assert sum(1 for p in self.coordinator.pending_checkpoints() if not p.is_savepoint) <= MAX_CONCURRENT

    @invariant()
    def store_retains_the_newest_n_and_every_savepoint(self) -> None:
        retained = self.model.completed_checkpoints[-RETAIN:]
        expected = sorted(retained + self.model.completed_savepoints)
        assert [c.checkpoint_id for c in self.store.all()] == expected
        assert len([c for c in self.store.all() if not c.is_savepoint]) <= RETAIN
        if len(self.model.completed_checkpoints) > RETAIN:
            event("retain-N subsumed a checkpoint")

    @invariant()
    def latest_is_the_newest_completed_never_aborted(self) -> None:
        latest = self.store.latest()
        completed = self.model.completed_checkpoints + self.model.completed_savepoints
        assert (latest.checkpoint_id if latest else None) == (max(completed) if completed else None)
        assert latest is None or latest.checkpoint_id not in self.model.aborted
        newest_checkpoint = self.store.latest(CheckpointKind.CHECKPOINT)
        if self.model.completed_checkpoints:
            assert newest_checkpoint.checkpoint_id == self.model.completed_checkpoints[-1]

    @invariant()
    def failure_state_matches(self) -> None:
        assert (self.coordinator.pipeline_failure is not None) == self.model.failed
        assert self.failures.consecutive_failures == self.model.consecutive

    @invariant()
    def retained_metadata_is_readable(self) -> None:
        for entry in self.store.all():
            assert deserialize(self.storage.read(entry.metadata_path), path=entry.metadata_path) == entry.metadata


CoordinatorMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestCoordinatorMachine = CoordinatorMachine.TestCase
