"""Expressions a re-run need not repeat are found in a frame's plan, and their order-free uses are not."""

from __future__ import annotations

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

from epochal.state.determinism import SUBTASK_COLUMN, PlanInspector, findings


@pytest.fixture(scope="module")
def events(spark):
    return spark.range(20).select(F.col("id"), (F.col("id") % 3).alias("user"), F.lit("2026-11-01").alias("day"))


FOUND = {
    "rand": (lambda df: df.select(F.rand(7).alias("r")), "rand()"),
    "uuid": (lambda df: df.select(F.expr("uuid()").alias("u")), "uuid()"),
    "monotonic id": (lambda df: df.withColumn("row", F.monotonically_increasing_id()), "monotonically_increasing_id()"),
    "partition id": (lambda df: df.withColumn("p", F.spark_partition_id()), "spark_partition_id()"),
    "wall clock": (lambda df: df.withColumn("seen", F.current_timestamp()), "current_timestamp()"),
    "today": (lambda df: df.where(F.col("day") < F.current_date()), "current_date()"),
    "first": (lambda df: df.groupBy("user").agg(F.first("id").alias("first_id")), "first() without an order"),
    "last in a window": (lambda df: df.withColumn("l", F.last("id").over(Window.partitionBy("user"))), "last() without an order"),
    "limit": (lambda df: df.limit(3), "limit() without orderBy()"),
    "sample": (lambda df: df.sample(0.5, seed=1), "sample()"),
    "a UDF marked so": (lambda df: df.select(F.udf(lambda x: x, "long").asNondeterministic()("id").alias("x")),
                        "(asNondeterministic)"),
}

CLEAN = {
    "sums": lambda df: df.groupBy("user").agg(F.sum("id").alias("total"), F.max("day").alias("day")),
    "a list": lambda df: df.groupBy("user").agg(F.array_sort(F.collect_list("id")).alias("ids")),  # sorted later, too
    "the file": lambda df: df.withColumn("file", F.input_file_name()),  # an epoch's files are recorded
    "top 3": lambda df: df.orderBy(F.col("id").desc()).select("id", "user").limit(3),
    "ordered pick": lambda df: df.groupBy("user").agg(F.max_by("id", "id").alias("last_id")),
    "a column named first": lambda df: df.withColumnRenamed("id", "first").select(F.col("first") + 1),
    "a deterministic UDF": lambda df: df.select(F.udf(lambda x: x, "long")("id").alias("x")),
    # epochal's own subtasks (run_subtask_process), not the user's expression (probe 16)
    "epochal's subtasks": lambda df: df.repartition(2).withColumn(SUBTASK_COLUMN, F.spark_partition_id()),
}


@pytest.mark.parametrize("case", FOUND, ids=list(FOUND))
def test_an_expression_a_rerun_need_not_repeat_is_found(events, case):
    build, expected = FOUND[case]
    found = findings(build(events))
    assert any(expected in f.expression for f in found), found
    assert all(f.reason for f in found)


@pytest.mark.parametrize("case", CLEAN, ids=list(CLEAN))
def test_order_free_uses_are_not_found(events, case):
    assert findings(CLEAN[case](events)) == []


def test_the_inspector_reads_each_place_once_and_says_the_stage_and_the_place(events):
    inspector = PlanInspector()
    inspector.see("enrich", "output main", events.withColumn("row", F.monotonically_increasing_id()))
    inspector.see("enrich", "output main", events)  # the same place again: not read again
    inspector.see("enrich", "keyed state seen", events.groupBy("user").agg(F.sum("id").alias("value")))
    inspector.see("enrich", "output skipped", None)  # an output the stage did not produce
    assert inspector.warnings() == [
        "stage enrich, output main: monotonically_increasing_id(): depends on how the rows are split into "
        "partitions: another value at another parallelism or file layout"
    ]


def test_what_an_upstream_stage_wrote_is_named_at_that_stage_only(events):
    inspector = PlanInspector()
    inspector.enter("parse", ["landing"])
    parsed = events.withColumn("seen", F.current_timestamp())
    inspector.see("parse", "output events", parsed)
    inspector.enter("totals", ["parse.events"])
    totals = parsed.groupBy("user").agg(F.sum("id").alias("value"), F.max("seen").alias("seen"))
    inspector.see("totals", "keyed state sum", totals)
    inspector.see("totals", "output totals", totals.limit(2))
    inspector.enter("report", ["totals.totals"])  # two stages down: parse's clock is still parse's
    inspector.see("report", "output report", totals.limit(2).select("user", "seen"))
    assert [w.split(":", 2)[:2] for w in inspector.warnings()] == [
        ["stage parse, output events", " current_timestamp()"],
        ["stage totals, output totals", " limit() without orderBy()"],
    ]
    sources = inspector.sources()  # where a difference downstream comes from: each stage once, with its own
    assert list(sources) == ["parse", "totals"] and [len(v) for v in sources.values()] == [1, 1]
    assert sources["parse"][0].startswith("current_timestamp()") and sources["totals"][0].startswith("limit()")
