"""Key groups, as Flink's ``KeyGroupRangeAssignment``.

A key's group is computed in the JVM with Spark's Murmur3 ``hash`` (stable
across processes, machines and Spark releases) modulo the maximum parallelism,
which is fixed when a state table is created. Key groups are the unit of
rescaling: subtask ``i`` of ``p`` owns a contiguous range of groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

DEFAULT_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15


def check_parallelism(max_parallelism: int, parallelism: int | None = None) -> None:
    if not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max parallelism must be in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {max_parallelism}")
    if parallelism is not None and not 1 <= parallelism <= max_parallelism:
        raise ValueError(f"parallelism must be in [1, max parallelism {max_parallelism}], got {parallelism}")


def key_group_col(key: Column | str, max_parallelism: int) -> Column:
    """The key group of ``key``, as a JVM expression: ``pmod(murmur3(key), max_parallelism)``."""
    check_parallelism(max_parallelism)
    col = F.col(key) if isinstance(key, str) else key
    return F.pmod(F.hash(col), F.lit(max_parallelism)).cast("int")


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Subtask owning ``key_group`` (Flink ``computeOperatorIndexForKeyGroup``)."""
    check_parallelism(max_parallelism, parallelism)
    if not 0 <= key_group < max_parallelism:
        raise ValueError(f"key group {key_group} outside [0, {max_parallelism})")
    return key_group * parallelism // max_parallelism


def subtask_col(key_group: Column | str, max_parallelism: int, parallelism: int) -> Column:
    """JVM form of :func:`operator_index_for_key_group`."""
    check_parallelism(max_parallelism, parallelism)
    col = F.col(key_group) if isinstance(key_group, str) else key_group
    return F.floor(col * F.lit(parallelism) / F.lit(max_parallelism)).cast("int")


@dataclass(frozen=True)
class KeyGroupRange:
    """Inclusive range of key groups ``[start, end]``; empty when ``end < start``."""

    start: int
    end: int

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)


def key_group_range_for_operator(max_parallelism: int, parallelism: int, index: int) -> KeyGroupRange:
    """Key groups owned by subtask ``index`` (Flink ``computeKeyGroupRangeForOperatorIndex``)."""
    check_parallelism(max_parallelism, parallelism)
    if not 0 <= index < parallelism:
        raise ValueError(f"subtask index {index} outside [0, {parallelism})")
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)
