"""A synthetic keyed-state pipeline for the checkpoint benchmarks (parts 2 and 4 at large state).

``churn``: one stage holding a value state of ``keys`` keys (``k00000001`` ...,
``bigint`` values). Epoch ``e`` of the schedule sets a fraction ``f`` of the
keys (every ``1/f``-th) to a new value, with ``KeyedStateBackend.update``, in
the runner like any stage. The source has no files: its plan records the
fraction, so a replay changes the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.pipeline.sources import SourceBatch
from epochal.state.descriptors import ValueStateDescriptor

NAME = "bench_churn"
VALUE = ValueStateDescriptor("value", value_type=T.LongType())


@dataclass(frozen=True)
class ChurnSource:
    """Plans epoch ``e`` as ``schedule[e]`` (the fraction of keys it changes)."""

    name: str
    keys: int
    schedule: tuple[float, ...]

    def plan(self, info) -> SourceBatch:
        fraction = self.schedule[min(info.epoch, len(self.schedule) - 1)]
        position = {"partition": info.partition, "epoch": info.epoch, "fraction": fraction, "keys": self.keys}
        return SourceBatch(self.name, info.partition, (), position)


def changed_rows(spark, keys: int, fraction: float, epoch: int) -> DataFrame:
    """The keys epoch ``epoch`` changes and their new values: ``key``, ``value``."""
    step = max(1, round(1 / fraction))
    ids = spark.range(0, keys, step)
    return ids.select(F.format_string("k%08d", F.col("id")).alias("key"), (F.col("id") * 1000 + epoch).alias("value"))


class ChurnStage:
    name, inputs, outputs = "churn", ("changes",), ("changed",)
    keyed_state: Sequence = (VALUE,)
    operator_state: Sequence = ()

    def process(self, ctx, inputs):
        position = inputs["changes"].position
        rows = changed_rows(ctx.spark, position["keys"], position["fraction"], ctx.epoch)
        ctx.keyed.update(VALUE, rows)
        return {"changed": rows}


def build(keys: int, schedule: Sequence[float]):
    def factory(settings):
        from epochal.pipeline.dag import Pipeline

        return Pipeline(
            name=NAME, sources=[ChurnSource("changes", keys, tuple(schedule))], stages=[ChurnStage()], sinks=[],
            max_parallelism=settings.spark.max_parallelism,
        )

    return factory


def register(keys: int, schedule: Sequence[float]) -> None:
    from epochal.pipeline.registry import PIPELINES

    PIPELINES[NAME] = build(keys, schedule)
