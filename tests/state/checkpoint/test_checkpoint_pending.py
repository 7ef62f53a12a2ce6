"""PendingCheckpoint, AckResult, status groups and failure reasons."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from epochal.config.models import CheckpointMode
from epochal.state.errors import IllegalCheckpointTransition
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.pending import (
    FAILED_STATUSES,
    IN_PROGRESS_STATUSES,
    SUCCESS_STATUSES,
    AckResult,
    CheckpointSpec,
    PendingCheckpoint,
    PendingStatus,
)
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.checkpoint.testing import make_handle

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def pending(tasks=("a", "b"), epoch: int = 3) -> PendingCheckpoint:
    return PendingCheckpoint(CheckpointSpec(
        checkpoint_id=5, epoch=epoch, kind=CheckpointKind.CHECKPOINT, mode=CheckpointMode.INCREMENTAL,
        tasks=frozenset(tasks), triggered_at=T0, deadline=T0 + timedelta(seconds=60),
        location="memory:///c/chk-5", metadata_path="memory:///c/chk-5/_metadata",
    ))


def failure(reason: CheckpointFailureReason) -> CheckpointFailure:
    return CheckpointFailure(checkpoint_id=5, reason=reason, at=T0 + timedelta(seconds=1))


def test_status_groups_cover_the_enum_without_overlap() -> None:
    groups = [IN_PROGRESS_STATUSES, SUCCESS_STATUSES, FAILED_STATUSES]
    assert set().union(*groups) == set(PendingStatus)
    assert sum(len(g) for g in groups) == len(PendingStatus)


def test_acknowledge_results() -> None:
    p = pending()
    at = T0 + timedelta(seconds=2)
    assert p.acknowledge("a", 3, [make_handle("a")], at) is AckResult.SUCCESS
    assert p.acknowledge("a", 3, [], at) is AckResult.DUPLICATE
    assert p.acknowledge("zzz", 3, [], at) is AckResult.UNKNOWN
    assert p.acknowledge("b", 4, [], at) is AckResult.EPOCH_MISMATCH
    assert p.not_yet_acknowledged == {"b"} and not p.is_fully_acknowledged
    assert p.acknowledge("b", 3, [], at) is AckResult.SUCCESS
    assert p.is_fully_acknowledged
    p.mark_completed(at)
    assert p.status is PendingStatus.COMPLETED
    assert p.acknowledge("b", 3, [], at) is AckResult.DISCARDED


def test_cannot_complete_before_every_ack() -> None:
    p = pending()
    with pytest.raises(IllegalCheckpointTransition, match=r"cannot complete: waiting for \['a', 'b'\]"):
        p.mark_completed(T0)


def test_abort_and_expire_are_final() -> None:
    aborted, expired = pending(), pending()
    aborted.abort(failure(CheckpointFailureReason.TASK_FAILURE))
    expired.abort(failure(CheckpointFailureReason.CHECKPOINT_EXPIRED))
    assert aborted.status is PendingStatus.ABORTED and expired.status is PendingStatus.EXPIRED
    assert aborted.failure.reason is CheckpointFailureReason.TASK_FAILURE
    assert aborted.finished_at == T0 + timedelta(seconds=1)
    assert aborted.acknowledge("a", 3, [], T0) is AckResult.DISCARDED
    with pytest.raises(IllegalCheckpointTransition, match="cannot go from aborted to aborted"):
        aborted.abort(failure(CheckpointFailureReason.TASK_FAILURE))


def test_overdue_at_the_deadline() -> None:
    p = pending()
    assert not p.is_overdue(T0 + timedelta(seconds=59.9))
    assert p.is_overdue(T0 + timedelta(seconds=60))


def test_to_metadata_collects_handles_and_ack_latency() -> None:
    p = pending()
    p.acknowledge("b", 3, [make_handle("b", version=2)], T0 + timedelta(seconds=4))
    p.acknowledge("a", 3, [make_handle("a", "x"), make_handle("a", "y")], T0 + timedelta(seconds=2))
    meta = p.to_metadata(T0 + timedelta(seconds=5))
    assert [h.key for h in meta.handles] == ["a/x", "a/y", "b/s"]
    assert [(a.task, a.latency_s, a.handle_keys) for a in meta.acks] == [("a", 2.0, ("a/x", "a/y")), ("b", 4.0, ("b/s",))]
    assert (meta.checkpoint_id, meta.epoch, meta.duration_s) == (5, 3, 5.0)


def test_reasons_carry_pre_flight_counts_and_message() -> None:
    for reason in CheckpointFailureReason:
        assert reason.value == reason.name and reason.message.endswith(".")
        assert CheckpointFailureReason(reason.value) is reason
    pre_flight = {r for r in CheckpointFailureReason if r.pre_flight}
    assert {CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS, CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS,
            CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING, CheckpointFailureReason.COORDINATOR_SHUTDOWN} <= pre_flight
    assert CheckpointFailureReason.CHECKPOINT_EXPIRED.counts and not CheckpointFailureReason.CHECKPOINT_EXPIRED.pre_flight
    assert not CheckpointFailureReason.CHECKPOINT_SUBSUMED.counts


def test_failure_describe() -> None:
    f = CheckpointFailure(checkpoint_id=7, reason=CheckpointFailureReason.TASK_FAILURE, detail="stage x", at=T0)
    assert f.describe() == "checkpoint 7: TASK_FAILURE (stage x)"
    assert CheckpointFailure(checkpoint_id=None, reason=CheckpointFailureReason.IO_EXCEPTION, at=T0).describe() == "trigger: IO_EXCEPTION"
