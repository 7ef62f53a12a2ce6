"""Key groups: every key maps to exactly one key group and one subtask, for any parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from epochal.state.keygroups import (
    key_group_col,
    key_group_range_for_operator,
    operator_index_for_key_group,
    subtask_col,
)

max_par = st.integers(min_value=1, max_value=1 << 15)


@given(data=st.data(), max_parallelism=max_par)
def test_every_key_group_belongs_to_exactly_one_subtask(data, max_parallelism):
    parallelism = data.draw(st.integers(min_value=1, max_value=min(max_parallelism, 512)))
    ranges = [key_group_range_for_operator(max_parallelism, parallelism, i) for i in range(parallelism)]
    # ranges are contiguous, ordered, non-overlapping, and cover [0, max_parallelism)
    assert ranges[0].start == 0 and ranges[-1].end == max_parallelism - 1
    for left, right in zip(ranges, ranges[1:]):
        assert right.start == left.end + 1
    assert sum(len(r) for r in ranges) == max_parallelism
    key_group = data.draw(st.integers(min_value=0, max_value=max_parallelism - 1))
    owner = operator_index_for_key_group(max_parallelism, parallelism, key_group)
    assert [i for i, r in enumerate(ranges) if key_group in r] == [owner]


def test_out_of_range_arguments_are_refused():
    with pytest.raises(ValueError, match="parallelism must be in"):
        operator_index_for_key_group(8, 9, 0)
    with pytest.raises(ValueError, match="key group 8 outside"):
        operator_index_for_key_group(8, 2, 8)


@settings(max_examples=5, deadline=None)
@given(keys=st.lists(st.text(max_size=12), min_size=1, max_size=40, unique=True), max_parallelism=st.sampled_from([1, 7, 128, 4096]))
def test_key_groups_in_the_jvm_are_stable_and_match_the_ranges(spark, keys, max_parallelism):
    df = spark.createDataFrame([(k,) for k in keys], "key string")
    one = df.select("key", key_group_col("key", max_parallelism).alias("g"))
    # repartitioned differently, computed again: the same group for every key
    two = df.repartition(3).select("key", key_group_col("key", max_parallelism).alias("g2"))
    parallelism = min(max_parallelism, 3)
    rows = one.join(two, "key").select("key", "g", "g2", subtask_col("g", max_parallelism, parallelism).alias("s")).collect()
    assert len(rows) == len(keys)
    for row in rows:
        assert row.g == row.g2 and 0 <= row.g < max_parallelism
        assert row.s == operator_index_for_key_group(max_parallelism, parallelism, row.g)


def test_key_group_is_murmur3_known_value(spark):
    # Spark's hash() is Murmur3 with seed 42: a stable function, pinned here.
    assert spark.range(1).select(key_group_col(F.lit("user-1"), 128)).first()[0] == spark.range(1).select(
        F.pmod(F.hash(F.lit("user-1")), F.lit(128))
    ).first()[0]
