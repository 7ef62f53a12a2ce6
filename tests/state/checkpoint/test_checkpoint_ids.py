"""Checkpoint id counters: one contract suite over every counter, and several OS processes."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest

from epochal.state.errors import CheckpointStorageError
from epochal.state.checkpoint.ids import CheckpointIdCounter, FileIdCounter, InMemoryIdCounter


@pytest.fixture(params=["in-memory", "file-memory-fs", "file-local"])
def make_counter(request, tmp_path):
    """A factory of counters sharing one durable location (in-memory: one shared counter)."""
    if request.param == "in-memory":
        shared = InMemoryIdCounter()
        return lambda: shared
    url = f"memory://ids-{uuid.uuid4().hex}/ids" if request.param == "file-memory-fs" else str(tmp_path / "ids")
    return lambda: FileIdCounter(url)


def test_is_a_counter(make_counter) -> None:
    assert isinstance(make_counter(), CheckpointIdCounter)


def test_starts_at_one_and_increases(make_counter) -> None:
    counter = make_counter()
    assert counter.last_id() is None
    assert [counter.next_id() for _ in range(5)] == [1, 2, 3, 4, 5]
    assert counter.last_id() == 5


def test_two_counters_on_one_location_never_share_an_id(make_counter) -> None:
    first, second = make_counter(), make_counter()
    taken = [first.next_id(), second.next_id(), second.next_id(), first.next_id(), first.next_id()]
    assert taken == sorted(taken) and len(set(taken)) == len(taken)


def test_durable_across_instances(make_counter) -> None:
    counter = make_counter()
    for _ in range(3):
        counter.next_id()
    assert make_counter().next_id() == 4


def test_file_counter_skips_ids_claimed_elsewhere(tmp_path) -> None:
    stale, other = FileIdCounter(str(tmp_path)), FileIdCounter(str(tmp_path))
    assert stale.next_id() == 1
    for _ in range(10):
        other.next_id()
    assert stale.next_id() == 12


def test_file_counter_unwritable_location_is_a_storage_error(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(CheckpointStorageError, match="Could not (claim|list claimed) checkpoint id"):
        FileIdCounter(str(blocker / "ids")).next_id()


def _claim_many(url: str, count: int, out) -> None:
    counter = FileIdCounter(url)
    out.put([int(counter.next_id()) for _ in range(count)])


def test_concurrent_processes_never_get_the_same_id(tmp_path) -> None:
    processes, per_process = 4, 40
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    workers = [context.Process(target=_claim_many, args=(str(tmp_path / "ids"), per_process, queue))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    every = [i for ids in results for i in ids]
    assert len(every) == len(set(every)) == processes * per_process
    assert all(ids == sorted(ids) and len(set(ids)) == len(ids) for ids in results)
    assert sorted(every) == list(range(1, processes * per_process + 1))  # claims are contiguous


def test_concurrent_threads_on_two_counters_never_get_the_same_id(tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    counters = [FileIdCounter(str(tmp_path / "ids")), FileIdCounter(str(tmp_path / "ids"))]
    with ThreadPoolExecutor(max_workers=8) as pool:
        batches = list(pool.map(lambda i: [int(counters[i % 2].next_id()) for _ in range(25)], range(8)))
    every = [i for batch in batches for i in batch]
    assert sorted(every) == list(range(1, 201)), "unique and contiguous"
    assert all(batch == sorted(batch) for batch in batches), "increasing for each caller"


def test_advancing_past_a_restored_id_moves_every_counter_on_that_location(make_counter) -> None:
    """After a restore of checkpoint or savepoint 7 (another deployment's savepoint keeps its id), no later
    checkpoint takes 7 or below: Flink sets its counter past the restored id. Advancing backwards changes nothing."""
    first, second = make_counter(), make_counter()
    assert first.next_id() == 1
    first.advance_past(7)
    assert first.next_id() == 8 and second.next_id() == 9
    second.advance_past(3)
    assert [first.next_id(), second.next_id()] == [10, 11]


def test_a_restore_advances_the_coordinators_counter(tmp_path) -> None:
    from epochal.state.checkpoint.coordinator import CheckpointCoordinator

    counter = InMemoryIdCounter()
    restored = type("Restored", (), {"checkpoint_id": 12, "metadata": type("M", (), {"hook_states": {}})()})()
    coordinator = CheckpointCoordinator.__new__(CheckpointCoordinator)
    coordinator._pending, coordinator._hooks, coordinator._ids = {}, [], counter
    coordinator._resolver = type("Resolver", (), {"resolve": staticmethod(lambda pointer: restored)})()
    assert coordinator.restore("/elsewhere/savepoints/sp") is restored
    assert counter.next_id() == 13
