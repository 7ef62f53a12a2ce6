"""A tiny pipeline for runner tests: JSON lines {key, n} -> running sums per key.

Also runnable as a script, so crash tests can kill a real process:
``python -m tests.support.toy_pipeline CONFIG.yaml TO`` runs up to partition ``TO``;
``python -m tests.support.toy_pipeline CONFIG.yaml savepoint NAME`` takes a savepoint
(with the repository on PYTHONPATH, or as the working directory).
The ``EPOCHAL_CRASH_AFTER_S`` timer starts once the deployment is built; ``EPOCHAL_PAUSE_AT`` stops the process
at a named point (SIGSTOP) until it is continued (the fencing tests).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.pipeline.dag import Pipeline
from epochal.pipeline.sources import HourlyFolderSource
from epochal.pipeline.stage import SinkMode, SinkSpec
from epochal.state.descriptors import UnionListOperatorState, ValueStateDescriptor

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
TOTAL = ValueStateDescriptor("total", value_type=T.LongType())
SEEN = UnionListOperatorState("rows_seen", T.LongType())
ROWS = T.StructType([T.StructField("key", T.StringType()), T.StructField("n", T.LongType())])
TOTALS = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])


class Read:
    name, inputs, outputs, keyed_state, operator_state = "read", ("landing",), ("rows",), (), ()

    def process(self, ctx, inputs):
        files = list(inputs["landing"].files)
        if not files:
            return {"rows": ctx.spark.createDataFrame([], ROWS)}
        return {"rows": ctx.spark.read.schema(ROWS).json(files)}


class Sum:
    name, inputs, outputs, keyed_state, operator_state = "sum", ("read.rows",), ("totals",), (TOTAL,), (SEEN,)

    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.sum("n").alias("n"))
        joined = ctx.keyed.lookup(TOTAL, batch, "key")
        new = joined.select("key", (F.coalesce(F.col("total"), F.lit(0)) + F.col("n")).alias("value"))
        ctx.keyed.update(TOTAL, new)
        seen = ctx.operator.get_union_list_state(SEEN)
        previous = seen.get().where("subtask = 0").agg(F.coalesce(F.max("value"), F.lit(0)).alias("v"))
        count = inputs["read.rows"].agg(F.count(F.lit(1)).alias("c"))
        seen.update(previous.crossJoin(count).select(F.lit(0).alias("subtask"), (F.col("v") + F.col("c")).alias("value")))
        return {"totals": new.select("key", F.col("value").alias("total"))}

    def view(self, ctx, output):
        return ctx.keyed.values(TOTAL).select("key", F.col("value").alias("total"))


def build(settings) -> Pipeline:
    return Pipeline(
        name="toy",
        sources=[HourlyFolderSource("landing", settings.landing)],
        stages=[Read(), Sum()],
        sinks=[
            SinkSpec("totals", "sum.totals", SinkMode.UPSERT, TOTALS, keys=("key",)),
            SinkSpec("log", "read.rows", SinkMode.APPEND, ROWS),
        ],
        max_parallelism=16,
    )


def write_hour(landing: Path, hour: int, rows: list[tuple[str, int]]) -> None:
    start = START + timedelta(hours=hour)
    folder = landing / f"dt={start:%Y-%m-%d}" / f"hour={start:%H}"
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"key": k, "n": n}) + "\n" for k, n in rows)
    path = folder / "part-0000.jsonl"
    if not path.exists() or path.read_text() != text:  # landed files stay untouched: replays check them
        path.write_text(text)


def register() -> None:
    from epochal.pipeline.registry import PIPELINES

    PIPELINES["toy"] = build


if __name__ == "__main__":
    from epochal.config import load_settings
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    from epochal.pipeline.faults import arm_crash_timer

    register()
    settings = load_settings(sys.argv[1])
    runner = EpochRunner(build_deployment(settings))
    arm_crash_timer()
    if sys.argv[2] == "savepoint":
        runner.savepoint(sys.argv[3])
    else:
        runner.run(to=sys.argv[2])
