"""Stats tracker, failure manager and master hooks."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from epochal.config.models import CheckpointMode
from epochal.state.errors import HookError, InvalidCheckpointRequest, PipelineFailed
from epochal.state.checkpoint.failure import (
    CheckpointFailureManager,
    FailureState,
    InMemoryFailureStateRepository,
    StorageFailureStateRepository,
)
from epochal.state.checkpoint.hooks import check_identifiers, restore_hooks, trigger_hooks
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.pending import CheckpointSpec, PendingCheckpoint
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason as Reason
from epochal.state.checkpoint.stats import CheckpointStatsTracker, JsonLinesStatsHistory, StatsStatus
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.testing import FailingStorage, RecordingHook, make_handle

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def memory_storage() -> CheckpointStorage:
    return CheckpointStorage(f"memory://sfh-{uuid.uuid4().hex}/chk")


def acked(checkpoint_id: int, epoch: int = 0) -> PendingCheckpoint:
    pending = PendingCheckpoint(CheckpointSpec(
        checkpoint_id=checkpoint_id, epoch=epoch, kind=CheckpointKind.CHECKPOINT, mode=CheckpointMode.INCREMENTAL,
        tasks=frozenset({"a", "sink"}), triggered_at=T0, deadline=T0 + timedelta(seconds=60),
        location="memory:///x", metadata_path="memory:///x/_metadata",
    ))
    pending.acknowledge("a", epoch, [make_handle("a", rows=7, bytes_added=300)], T0 + timedelta(seconds=3))
    return pending


def failure(reason: Reason, checkpoint_id: int | None = 1) -> CheckpointFailure:
    return CheckpointFailure(checkpoint_id=checkpoint_id, reason=reason, detail="why", at=T0 + timedelta(seconds=9))


# ------------------------------------------------------------------- stats
def test_stats_of_a_completed_checkpoint() -> None:
    tracker = CheckpointStatsTracker()
    pending = acked(1)
    pending.acknowledge("sink", 0, [], T0 + timedelta(seconds=5))
    entry = tracker.report_completed(pending, pending.to_metadata(T0 + timedelta(seconds=6)))
    assert (entry.status, entry.duration_s, entry.tasks, entry.acknowledged) == (StatsStatus.COMPLETED, 6.0, 2, 2)
    assert entry.ack_latency_s == {"a": 3.0, "sink": 5.0}
    assert (entry.state_rows, entry.state_bytes, entry.bytes_written) == (7, 300, 300)
    assert tracker.get(1) == entry


def test_stats_of_a_failed_checkpoint() -> None:
    entry = CheckpointStatsTracker().report_failed(acked(2), failure(Reason.CHECKPOINT_EXPIRED, 2))
    assert (entry.status, entry.failure_reason, entry.failure_detail) == (StatsStatus.FAILED, Reason.CHECKPOINT_EXPIRED, "why")
    assert (entry.duration_s, entry.acknowledged, entry.bytes_written) == (9.0, 1, 300)


def test_stats_history_is_bounded_and_durable() -> None:
    storage = memory_storage()
    tracker = CheckpointStatsTracker(JsonLinesStatsHistory(storage), max_entries=3)
    for cid in range(1, 6):
        tracker.report_failed(acked(cid), failure(Reason.TASK_FAILURE, cid))
    assert [e.checkpoint_id for e in tracker.history()] == [3, 4, 5]
    reopened = CheckpointStatsTracker(JsonLinesStatsHistory(storage), max_entries=3)
    assert reopened.history() == tracker.history()
    assert len(storage.read(storage.stats_path).splitlines()) == 3


def test_stats_keep_a_reason_holding_unicode_line_separators() -> None:
    """A failure's detail (an error message quoting a user's data) may hold U+2028, U+2029 or U+0085, which JSON
    leaves unescaped: the history is split on newlines only, so the entry reads back whole."""
    storage = memory_storage()
    detail = "bad key 'ann\u2028\u2029\u0085' in stage x"
    tracker = CheckpointStatsTracker(JsonLinesStatsHistory(storage))
    tracker.report_failed(acked(1), CheckpointFailure(checkpoint_id=1, reason=Reason.TASK_FAILURE, detail=detail, at=T0))
    tracker.report_failed(acked(2), failure(Reason.TASK_FAILURE, 2))
    reopened = CheckpointStatsTracker(JsonLinesStatsHistory(storage)).history()
    assert [(e.checkpoint_id, e.failure_detail) for e in reopened] == [(1, detail), (2, "why")]


def test_stats_skip_unreadable_lines() -> None:
    storage = memory_storage()
    CheckpointStatsTracker(JsonLinesStatsHistory(storage)).report_failed(acked(1), failure(Reason.TASK_FAILURE))
    storage.write_atomic(storage.stats_path, storage.read(storage.stats_path) + b'{"truncated": \n\n')
    assert [e.checkpoint_id for e in CheckpointStatsTracker(JsonLinesStatsHistory(storage)).history()] == [1]


def test_stats_write_failure_never_fails_the_caller(caplog) -> None:
    storage = FailingStorage(f"memory://sfh-{uuid.uuid4().hex}", fail_when=lambda p: True)
    tracker = CheckpointStatsTracker(JsonLinesStatsHistory(storage))
    tracker.report_failed(acked(1), failure(Reason.TASK_FAILURE))
    assert [e.checkpoint_id for e in tracker.history()] == [1]
    assert "could not save checkpoint stats for checkpoint 1" in caplog.text


def test_stats_unknown_id_and_declines() -> None:
    tracker = CheckpointStatsTracker(max_entries=5)
    with pytest.raises(Exception, match=r"No statistics for checkpoint 9 \(only the last 5 are kept\)"):
        tracker.get(9)
    tracker.report_declined(Reason.TOO_MANY_CONCURRENT_CHECKPOINTS)
    tracker.report_declined(Reason.TOO_MANY_CONCURRENT_CHECKPOINTS)
    assert tracker.declined_counts() == {Reason.TOO_MANY_CONCURRENT_CHECKPOINTS: 2}


# ----------------------------------------------------------------- failures
def test_tolerable_failures_then_pipeline_failed() -> None:
    manager = CheckpointFailureManager(tolerable_failures=2)
    assert manager.record_failure(failure(Reason.CHECKPOINT_EXPIRED, 1)) is None
    assert manager.record_failure(failure(Reason.TASK_FAILURE, 9)) is None, "a task failure does not count (Flink)"
    assert manager.consecutive_failures == 1
    assert manager.record_failure(failure(Reason.CHECKPOINT_DECLINED, 2)) is None
    error = manager.record_failure(failure(Reason.FINALIZE_FAILED, 3))
    assert isinstance(error, PipelineFailed)
    assert str(error).startswith(
        "The pipeline failed: 3 consecutive checkpoint failures (tolerable: 2): checkpoint 1: CHECKPOINT_EXPIRED (why); "
        "checkpoint 2: CHECKPOINT_DECLINED (why); checkpoint 3: FINALIZE_FAILED (why). Operator action: fix the cause"
    )
    assert [f.checkpoint_id for f in error.failures] == [1, 2, 3]
    with pytest.raises(PipelineFailed):
        manager.check()


def test_success_resets_and_non_counting_reasons_are_ignored() -> None:
    manager = CheckpointFailureManager(tolerable_failures=1)
    manager.record_failure(failure(Reason.CHECKPOINT_EXPIRED))
    manager.record_success()
    assert manager.consecutive_failures == 0
    manager.record_failure(failure(Reason.CHECKPOINT_EXPIRED))
    for reason in (Reason.TOO_MANY_CONCURRENT_CHECKPOINTS, Reason.CHECKPOINT_SUBSUMED, Reason.COORDINATOR_SHUTDOWN):
        assert manager.record_failure(failure(reason)) is None
    assert manager.consecutive_failures == 1
    assert manager.record_failure(failure(Reason.IO_EXCEPTION, None)) is not None


def test_zero_tolerable_failures_fails_on_the_first() -> None:
    assert CheckpointFailureManager(0).record_failure(failure(Reason.CHECKPOINT_DECLINED)) is not None


def test_failed_state_survives_a_new_process_until_reset() -> None:
    storage = memory_storage()
    first = CheckpointFailureManager(0, StorageFailureStateRepository(storage))
    first.record_failure(failure(Reason.CHECKPOINT_EXPIRED))
    first.record_success()  # a failed pipeline stays failed until reset
    second = CheckpointFailureManager(0, StorageFailureStateRepository(storage))
    assert second.pipeline_failure is not None and second.state.failed
    second.reset()
    assert CheckpointFailureManager(0, StorageFailureStateRepository(storage)).pipeline_failure is None


def test_in_memory_repository_round_trip() -> None:
    repo = InMemoryFailureStateRepository()
    repo.save(FailureState(failures=(failure(Reason.TASK_FAILURE),), failed=True))
    assert CheckpointFailureManager(5, repo).pipeline_failure is not None


# -------------------------------------------------------------------- hooks
def test_trigger_hooks_collect_json_states() -> None:
    offsets, silent = RecordingHook("offsets", {"p0": 12}), RecordingHook("silent", None)
    assert trigger_hooks([offsets, silent], 3, 7) == {"offsets": {"p0": 12}}
    assert offsets.triggered == [(3, 7)] and silent.triggered == [(3, 7)]


def test_hook_failures_are_hook_errors() -> None:
    with pytest.raises(HookError, match="Master hook 'bad' failed on trigger: RuntimeError: hook trigger failed"):
        trigger_hooks([RecordingHook("bad", fail_on="trigger")], 1, 0)
    with pytest.raises(HookError, match="the state of master hook 'odd' must be plain JSON"):
        trigger_hooks([RecordingHook("odd", {"t": object()})], 1, 0)
    with pytest.raises(HookError, match="Master hook 'bad' failed on restore"):
        restore_hooks([RecordingHook("bad", fail_on="restore")], 1, {})


def test_restore_hooks_and_unclaimed_state() -> None:
    hook = RecordingHook("offsets")
    restore_hooks([hook], 4, {"offsets": {"p0": 1}})
    assert hook.restored == [(4, {"p0": 1})]
    with pytest.raises(HookError, match=r"has state for master hooks that are not registered: \['gone'\]"):
        restore_hooks([hook], 4, {"gone": 1})
    restore_hooks([hook], 5, {"gone": 1}, allow_non_restored_state=True)
    assert hook.restored[-1] == (5, None)


def test_hook_identifiers_must_be_unique() -> None:
    with pytest.raises(InvalidCheckpointRequest, match="Two master hooks have the identifier 'x'"):
        check_identifiers([RecordingHook("x"), RecordingHook("x")])
