"""Savepoints outlive the rest of the checkpoint storage (issue 19): resolved, re-listed, never collided with.

No Spark: file storage in ``tmp_path``, the in-memory store standing for the Delta one.
"""

from __future__ import annotations

import shutil

import pytest

from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.completed import RetentionStatus
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.checkpoint.ids import FileIdCounter
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.storage import SAVEPOINT_IN_PROGRESS, CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.survivors import highest_visible_id, rebuild_store, surviving_savepoints
from epochal.state.checkpoint.testing import make_handle
from epochal.state.errors import CheckpointNotFound

TASKS = ("a",)


def coordinator(storage: CheckpointStorage, store, floor: bool = True) -> CheckpointCoordinator:
    counter = FileIdCounter(storage.ids_url, floor=(lambda: highest_visible_id(storage, store)) if floor else None)
    return CheckpointCoordinator(storage=storage, store=store, clock=ManualClock(), id_counter=counter,
                                 policy=CoordinatorPolicy(timeout_s=60))


def complete(c: CheckpointCoordinator, epoch: int, savepoint: str | None = None):
    started = c.trigger_savepoint(epoch, TASKS, name=savepoint) if savepoint else c.trigger(epoch, TASKS)
    ack = c.acknowledge(started.pending.checkpoint_id, "a", epoch, [make_handle("a", version=epoch)])
    assert ack.completion is not None and ack.completion.completed is not None, ack
    return ack.completion.completed


def lose_all_but_savepoints(base) -> None:
    for child in base.iterdir():
        if child.name != "savepoints":
            shutil.rmtree(child) if child.is_dir() else child.unlink()


@pytest.fixture()
def survived(tmp_path):
    """Checkpoints 1, 2, savepoint 3 ('keep', epoch 1), checkpoint 4; then all but savepoints/ lost."""
    base = tmp_path / "checkpoints"
    storage = CheckpointStorage(str(base))
    first = coordinator(storage, InMemoryCompletedCheckpointStore(max_retained=2))
    complete(first, 0), complete(first, 1)
    kept = complete(first, 1, savepoint="keep")
    complete(first, 2)
    assert int(kept.checkpoint_id) == 3
    lose_all_but_savepoints(base)
    assert sorted(p.name for p in base.iterdir()) == ["savepoints"]
    return storage, kept


def test_a_savepoint_the_store_lost_resolves_from_its_metadata(survived) -> None:
    storage, kept = survived
    resolver = CheckpointResolver(storage, InMemoryCompletedCheckpointStore())
    for pointer in ("keep", kept.location, kept.metadata_path):
        entry = resolver.resolve(pointer)
        assert entry.metadata == kept.metadata and entry.status is RetentionStatus.EXTERNAL
        assert entry.metadata_path == kept.metadata_path


def test_a_savepoint_still_marked_in_progress_and_an_uncommitted_checkpoint_stay_refused(survived, tmp_path) -> None:
    storage, kept = survived
    resolver = CheckpointResolver(storage, InMemoryCompletedCheckpointStore())
    storage.write_atomic(f"{kept.location}/{SAVEPOINT_IN_PROGRESS}", b"3")
    with pytest.raises(CheckpointNotFound, match="never committed"):
        resolver.resolve("keep")
    assert rebuild_store(storage, InMemoryCompletedCheckpointStore()) == []
    storage.delete_tree(f"{kept.location}/{SAVEPOINT_IN_PROGRESS}")
    storage.write_atomic(storage.metadata_path(3), storage.read(kept.metadata_path))  # a chk-3 never committed
    with pytest.raises(CheckpointNotFound, match=r"is not in the completed-checkpoint store: it was never completed "
                                                  r"\(the store holds none\)"):
        resolver.resolve("chk-3")


def test_the_id_of_a_savepoint_whose_process_died_is_named_as_that_savepoint_never_committed(tmp_path) -> None:
    """Found from outside (probe 10, 2026-12-06): ``checkpoints inspect`` of a killed savepoint's id said "no
    checkpoint 32 was completed yet" at ``chk-32``, as if it might still complete, and named no savepoint."""
    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    store = InMemoryCompletedCheckpointStore(max_retained=2)
    complete(coordinator(storage, store), 0)
    started = coordinator(storage, store).trigger_savepoint(1, TASKS, name="half")  # its process dies here
    taken = int(started.pending.checkpoint_id)
    with pytest.raises(CheckpointNotFound) as raised:
        CheckpointResolver(storage, store).resolve(str(taken))
    assert f"it is savepoint 'half' ({storage.savepoint_dir('half')}), which was never committed" in str(raised.value)
    with pytest.raises(CheckpointNotFound, match="no checkpoint 9 was completed yet"):
        CheckpointResolver(storage, store).resolve("9")


def test_a_removed_savepoint_stays_refused(survived) -> None:
    storage, kept = survived
    store = InMemoryCompletedCheckpointStore()
    store.add(kept)
    store.remove(3)
    with pytest.raises(CheckpointNotFound, match="removed"):
        CheckpointResolver(storage, store).resolve("keep")
    assert rebuild_store(storage, store) == [], "a store that knows any id is not rebuilt"


def test_an_empty_store_is_rebuilt_from_the_savepoints_and_new_ids_come_after_them(survived) -> None:
    storage, kept = survived
    store = InMemoryCompletedCheckpointStore(max_retained=2)
    assert [e.metadata for e in rebuild_store(storage, store)] == [kept.metadata]
    assert [(int(e.checkpoint_id), e.status, e.metadata_path) for e in store.all()] == [
        (3, RetentionStatus.RETAINED, kept.metadata_path)
    ]
    assert rebuild_store(storage, store) == [], "once"
    assert CheckpointResolver(storage, store).resolve("keep").status is RetentionStatus.RETAINED
    restarted = coordinator(storage, store)
    assert [int(complete(restarted, e).checkpoint_id) for e in (2, 3)] == [4, 5]
    assert [int(e.checkpoint_id) for e in store.all()] == [3, 4, 5]


def test_without_the_floor_the_restarted_counter_would_collide(survived) -> None:
    storage, kept = survived
    assert int(FileIdCounter(storage.ids_url).next_id()) == 1  # what ids/ alone knows after the loss
    storage.delete_tree(storage.ids_url)
    store = InMemoryCompletedCheckpointStore()
    assert highest_visible_id(storage, store) == 3
    store.add(kept.model_copy(update={"metadata": kept.metadata.model_copy(update={"checkpoint_id": 9})}))
    assert highest_visible_id(storage, store) == 9, "store rows count too"
    storage.write_atomic(storage.metadata_path(12), b"not yet committed")
    assert highest_visible_id(storage, store) == 12, "chk-* folders count too"


def test_a_savepoint_whose_id_was_claimed_again_resolves_to_itself(survived) -> None:
    """ids/ and the store lost, a counter without floor reuses id 3: the savepoint is still its own."""
    storage, kept = survived
    store = InMemoryCompletedCheckpointStore(max_retained=5)
    reused = coordinator(storage, store, floor=False)
    assert [int(complete(reused, e).checkpoint_id) for e in (0, 1, 2)] == [1, 2, 3]
    entry = CheckpointResolver(storage, store).resolve("keep")
    assert entry.metadata == kept.metadata and entry.is_savepoint and entry.status is RetentionStatus.EXTERNAL
    assert [e.metadata_path for e in surviving_savepoints(storage)] == [kept.metadata_path]


def test_a_separate_savepoints_dir_is_never_adopted(tmp_path) -> None:
    shared = tmp_path / "shared-savepoints"
    storage = CheckpointStorage(str(tmp_path / "a"), str(shared))
    complete(coordinator(storage, InMemoryCompletedCheckpointStore()), 0, savepoint="theirs")
    assert not storage.savepoints_inside_base
    other = CheckpointStorage(str(tmp_path / "b"), str(shared))  # another deployment sharing the folder
    assert rebuild_store(other, InMemoryCompletedCheckpointStore()) == []
    assert CheckpointStorage(str(tmp_path / "c")).savepoints_inside_base


def test_checkpoints_list_says_which_savepoint_folder_was_deleted_by_hand(tmp_path, capsys) -> None:
    """Found from outside (probes 8 and 14): a savepoint whose folder a user deleted was still listed as plain
    "retained", though no restore can read it. The store keeps its row (a savepoint is the user's to remove);
    ``checkpoints list`` and ``inspect`` say its ``_metadata`` is missing. No JVM: the store is written by delta-rs."""
    import json

    from epochal.orchestration.cli import main
    from epochal.state.checkpoint.store import DeltaCompletedCheckpointStore

    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    c = coordinator(storage, DeltaCompletedCheckpointStore(None, storage.completed_store_url, max_retained=2))
    first = complete(c, 0)
    gone = complete(c, 0, savepoint="gone")
    complete(c, 0, savepoint="kept")
    shutil.rmtree(tmp_path / "checkpoints" / "savepoints" / "gone")
    storage.write_atomic(first.metadata_path, b'{"garbage": tru')  # probe 18: a corrupt one was plain "retained"
    (tmp_path / "landing").mkdir()
    config = tmp_path / "epochal.yaml"
    config.write_text(f"pipeline: clickstream\nlanding: {tmp_path / 'landing'}\nwarehouse: {tmp_path / 'warehouse'}\n"
                      f"checkpoints: {{dir: {tmp_path / 'checkpoints'}}}\npartitions: {{start: 2026-11-01T00:00:00Z}}\n")
    assert main(["checkpoints", "list", "--config", str(config), "--json"]) == 0
    listed = {c["name"] or c["id"]: (c["present"], c["corrupt"]) for c in json.loads(capsys.readouterr().out)["checkpoints"]}
    assert listed == {1: (True, True), "gone": (False, False), "kept": (True, False)}
    assert main(["checkpoints", "list", "--config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[2]: line for line in out if "savepoint" in line}
    assert "retained, missing" in lines["gone"] and "missing" not in lines["kept"] and "corrupt" not in lines["kept"], lines
    assert any(line.split()[:3] == ["1", "checkpoint", "retained,"] and "retained, corrupt" in line for line in out), out
    assert main(["checkpoints", "inspect", str(int(gone.checkpoint_id)), "--config", str(config)]) == 0
    assert "(retained, missing)" in capsys.readouterr().out


def test_a_rewind_to_a_later_epoch_is_not_given_as_the_reason_a_checkpoint_is_gone(tmp_path) -> None:
    """Found from outside (probe 16): checkpoint 2 (epoch 1), released by retention, was said to be likely removed by
    a later restore that rewound the state to epoch 3, which removes only checkpoints of epochs after 3."""
    from epochal.state.checkpoint.lineage import Lineage

    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    Lineage(storage).record(after=5, epoch=3, restored=4)
    resolver = CheckpointResolver(storage, InMemoryCompletedCheckpointStore())
    assert resolver._rewound_since(2, epoch=1) is None
    assert "rewound the state to epoch 3" in resolver._rewound_since(2, epoch=5)
    assert "rewound the state to epoch 3" in resolver._rewound_since(2), "the epoch unknown: still a possible reason"
