"""CompletedCheckpointStore contract (in memory here; the Delta store in test_checkpoint_delta.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from epochal.state.checkpoint.completed import AWAITING_RELEASE, FINISHED, RESTORABLE, CompletedCheckpoint, RetentionStatus
from epochal.state.errors import CheckpointNotFound, DuplicateCheckpointError, IllegalCheckpointTransition
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from epochal.state.checkpoint.store import CompletedCheckpointStore, InMemoryCompletedCheckpointStore, plan_add

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def completed(checkpoint_id: int, *, savepoint: bool = False) -> CompletedCheckpoint:
    kind = CheckpointKind.SAVEPOINT if savepoint else CheckpointKind.CHECKPOINT
    name = f"sp-{checkpoint_id}" if savepoint else None
    at = T0 + timedelta(minutes=checkpoint_id)
    meta = CheckpointMetadata.create(checkpoint_id=checkpoint_id, epoch=checkpoint_id * 10, kind=kind,
                                     savepoint_name=name, triggered_at=at, completed_at=at)
    folder = f"savepoints/{name}" if savepoint else f"chk-{checkpoint_id}"
    return CompletedCheckpoint(metadata=meta, metadata_path=f"memory:///c/{folder}/_metadata")


def ids(entries) -> list[int]:
    return [e.checkpoint_id for e in entries]


def store_contract(store: CompletedCheckpointStore) -> None:
    """The contract every store meets with max_retained=2 (shared with the Delta store test)."""
    assert store.latest() is None and store.all() == [] and store.get(1) is None
    assert store.add(completed(1)) == []
    assert store.add(completed(2)) == []
    assert store.add(completed(3, savepoint=True)) == []
    subsumed = store.add(completed(4))
    assert ids(subsumed) == [1] and subsumed[0].status is RetentionStatus.SUBSUMED
    assert ids(store.all()) == [2, 3, 4]
    assert store.latest().checkpoint_id == 4
    assert store.latest(CheckpointKind.SAVEPOINT).checkpoint_id == 3
    assert store.get(1).status is RetentionStatus.SUBSUMED and store.get(4).metadata.epoch == 40
    with pytest.raises(DuplicateCheckpointError, match="Checkpoint 4 is already in the completed-checkpoint store"):
        store.add(completed(4))
    assert ids(store.add(completed(5))) == [2]
    assert ids(store.all()) == [3, 4, 5], "savepoints are never subsumed"
    assert store.remove(3).status is RetentionStatus.REMOVED
    assert ids(store.awaiting_release()) == [1, 2, 3]
    store.mark_released([1, 3])
    assert ids(store.awaiting_release()) == [2] and store.get(1).status is RetentionStatus.RELEASED
    with pytest.raises(CheckpointNotFound, match="Checkpoint 3 is not a retained entry"):
        store.remove(3)
    with pytest.raises(IllegalCheckpointTransition, match="cannot go from retained to released"):
        store.mark_released([5])


def test_in_memory_store_contract() -> None:
    store = InMemoryCompletedCheckpointStore(max_retained=2)
    assert isinstance(store, CompletedCheckpointStore)
    store_contract(store)


def test_plan_add_keeps_the_newest_by_id() -> None:
    retained = [completed(5), completed(9)]
    stored, subsumed = plan_add(retained, completed(7), max_retained=2)
    assert stored.retained and ids(subsumed) == [5]
    stored, subsumed = plan_add(retained, completed(3), max_retained=2)
    assert stored.status is RetentionStatus.SUBSUMED and ids(subsumed) == [3], "an older arrival is subsumed at once"


def test_retention_status_groups_cover_the_enum() -> None:
    groups = [RESTORABLE, AWAITING_RELEASE, FINISHED]
    assert set().union(*groups) == set(RetentionStatus)
    assert sum(len(g) for g in groups) == len(RetentionStatus)


def test_completed_checkpoint_views() -> None:
    cp = completed(3, savepoint=True)
    assert cp.is_savepoint and cp.location == "memory:///c/savepoints/sp-3" and cp.epoch == 30
    assert cp.with_status(RetentionStatus.REMOVED).status is RetentionStatus.REMOVED
    assert cp.status is RetentionStatus.RETAINED, "with_status returns a copy"
