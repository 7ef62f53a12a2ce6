"""Operator state: split, union and broadcast, written, snapshotted, restored and rescaled."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from epochal.state.descriptors import BroadcastState, ListOperatorState, UnionListOperatorState
from epochal.state.errors import StateSchemaError
from epochal.state.backends.operator import (
    OperatorStateBackend,
    OperatorStateStore,
    initialize_function,
    run_subtask_process,
    snapshot_function,
    split_assignment,
)


@given(total=st.integers(min_value=1, max_value=500), parallelism=st.integers(min_value=1, max_value=64))
def test_split_assignment_is_even_and_loses_nothing(total, parallelism):
    owners = [split_assignment(i, total, parallelism) for i in range(total)]
    assert all(0 <= o < parallelism for o in owners)
    assert owners == sorted(owners)  # contiguous runs
    counts = Counter(owners)
    sizes = [counts.get(s, 0) for s in range(parallelism)]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=4, deadline=None)
@given(
    per_subtask=st.lists(st.lists(st.integers(0, 10**6), max_size=6), min_size=1, max_size=4),
    new_parallelism=st.integers(min_value=1, max_value=5),
)
def test_split_redistribution_neither_loses_nor_duplicates(spark, tmp_path_factory, per_subtask, new_parallelism):
    backend = OperatorStateBackend(spark, str(tmp_path_factory.mktemp("op")), "src")
    d = ListOperatorState("offsets", T.LongType())
    rows = [(s, v, i) for s, values in enumerate(per_subtask) for i, v in enumerate(values)]
    backend.write(d, spark.createDataFrame(rows, "subtask int, value long, ord int"), parallelism=len(per_subtask))
    got = backend.read(d, new_parallelism).collect()
    assert Counter(r.value for r in got) == Counter(v for values in per_subtask for v in values)
    sizes = Counter(r.subtask for r in got)
    if new_parallelism == len(per_subtask):  # the parallelism it was written at: every subtask keeps its own list
        assert Counter((r.subtask, r.value) for r in got) == Counter((s, v) for s, vs in enumerate(per_subtask) for v in vs)
    elif got:
        assert set(sizes) <= set(range(new_parallelism))
        assert max(sizes.values()) - min(sizes.get(s, 0) for s in range(new_parallelism)) <= 1


def test_union_state_at_its_own_parallelism_stays_with_each_subtask(spark, tmp_path):
    """Read back at the parallelism it was written at, a union list is each subtask's own: written back
    every epoch, it does not grow (it is given whole to every subtask only after a rescale)."""
    backend = OperatorStateBackend(spark, str(tmp_path), "s")
    union = UnionListOperatorState("watermarks", T.LongType())
    backend.write(union, spark.createDataFrame([(0, 10), (1, 20)], "subtask int, value long"), parallelism=2)
    for _ in range(3):
        backend.write(union, backend.read(union, 2), parallelism=2)
    assert sorted((r.subtask, r.value) for r in backend.read(union, 2).collect()) == [(0, 10), (1, 20)]


def test_union_and_broadcast_give_every_subtask_everything(spark, tmp_path):
    backend = OperatorStateBackend(spark, str(tmp_path), "s")
    union = UnionListOperatorState("watermarks", T.LongType())
    backend.write(union, spark.createDataFrame([(0, 10), (1, 20)], "subtask int, value long"), parallelism=2)
    got = backend.read(union, 3).collect()
    assert {s: sorted(r.value for r in got if r.subtask == s) for s in range(3)} == {0: [10, 20], 1: [10, 20], 2: [10, 20]}

    bcast = BroadcastState("rules", T.StringType(), T.LongType())
    backend.write(bcast, spark.createDataFrame([("a", 1), ("b", 2)], "map_key string, value long"), parallelism=2)
    got = backend.read(bcast, 4).collect()
    for s in range(4):
        assert {r.map_key: r.value for r in got if r.subtask == s} == {"a": 1, "b": 2}


def test_a_handles_get_has_the_columns_the_readme_names(spark, tmp_path):
    """Found from outside (probe 16): the README named ``subtask, ord, parallelism, map_key, value`` for every
    handle's ``get()``, the stored table's columns; code written from it failed. The README names these now."""
    store = OperatorStateStore(OperatorStateBackend(spark, str(tmp_path), "s"), parallelism=2)
    for handle in (store.get_list_state(ListOperatorState("split", T.LongType())),
                   store.get_union_list_state(UnionListOperatorState("union", T.LongType()))):
        assert handle.get().columns == ["subtask", "old_subtask", "ord", "value"]
    assert store.get_broadcast_state(BroadcastState("rules", T.StringType(), T.LongType())).get().columns == [
        "subtask", "map_key", "value"]


def test_snapshot_and_restore_operator_state(spark, tmp_path):
    backend = OperatorStateBackend(spark, str(tmp_path), "s")
    d = ListOperatorState("buf", T.StringType())
    backend.write(d, spark.createDataFrame([(0, "x"), (1, "y")], "subtask int, value string"), parallelism=2)
    handle = backend.snapshot(d, parallelism=2)
    backend.write(d, spark.createDataFrame([(0, "z")], "subtask int, value string"), parallelism=2)
    backend.restore(d, handle)
    assert sorted(r.value for r in backend.read(d, 2).collect()) == ["x", "y"]
    assert handle.rows == 2 and handle.parallelism == 2 and handle.state_type == "split"


def test_mode_is_fixed_and_bad_rows_are_named(spark, tmp_path):
    backend = OperatorStateBackend(spark, str(tmp_path), "s")
    backend.open(ListOperatorState("buf", T.StringType()))
    with pytest.raises(StateSchemaError, match="was written as split state, not union"):
        backend.open(UnionListOperatorState("buf", T.StringType()))
    with pytest.raises(StateSchemaError, match=r"subtask outside \[0, 2\)"):
        backend.write(ListOperatorState("other", T.StringType()), spark.createDataFrame([(5, "x")], "subtask int, value string"), 2)
    fresh = OperatorStateBackend(spark, str(tmp_path), "s")  # another process, the value type changed
    fresh.check(ListOperatorState("never_written", T.LongType()))  # no table yet: nothing to refuse
    with pytest.raises(StateSchemaError, match=r"operator state s/buf: value type bigint differs from the stored string"):
        fresh.check(ListOperatorState("buf", T.LongType()))
    with pytest.raises(StateSchemaError, match=r"value type bigint differs"):
        fresh.open(ListOperatorState("buf", T.LongType()))


class CountingSource:
    """A CheckpointedFunction keeping a per-subtask counter as split list state."""

    descriptor = ListOperatorState("count", T.LongType())

    def __init__(self):
        self.restored = None
        self.state = None

    def initialize_state(self, context):
        self.restored = context.is_restored
        self.state = context.operator_state_store.get_list_state(self.descriptor)

    def snapshot_state(self, context):
        self.snapshot_epoch = context.epoch

    def process(self, subtask, records, state):
        counter = state.list(self.descriptor)
        total = (counter[0] if counter else 0) + len(records)
        counter[:] = [total]
        return [{"subtask": subtask, "seen": total}]


def test_checkpointed_function_and_subtask_process(spark, tmp_path):
    backend = OperatorStateBackend(spark, str(tmp_path), "counter")
    fn = CountingSource()
    store = OperatorStateStore(backend, parallelism=2)
    initialize_function(fn, store, is_restored=False)
    assert fn.restored is False
    out_schema = T.StructType([T.StructField("subtask", T.IntegerType()), T.StructField("seen", T.LongType())])
    batch = spark.range(10).toDF("n")
    out = run_subtask_process(store, batch, [fn.descriptor], fn, out_schema).collect()
    assert sum(r.seen for r in out) == 10 and {r.subtask for r in out} <= {0, 1}
    handles = snapshot_function(fn, store, checkpoint_id=1, epoch=1)
    assert fn.snapshot_epoch == 1 and handles[0].rows == len(out)

    # restart with another parallelism: the counters are split over 3 subtasks, none lost
    store3 = OperatorStateStore(backend, parallelism=3)
    initialize_function(fn, store3, is_restored=True)
    assert fn.restored is True
    assert sum(r.value for r in fn.state.get().collect()) == 10
