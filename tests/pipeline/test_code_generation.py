"""Small epochs run interpreted and join by shuffle, larger ones with generated code and Spark's broadcasts; the
results are the same.

An epoch's data is the bytes of the files its sources planned (recorded with the plan) plus the
state at the last checkpoint. Below ``spark.codegen_min_mb`` Spark evaluates the epoch's expressions
interpreted, compiling no Java; at or above it, or when a source lists no files, Spark generates code
as it does by default. Below ``spark.broadcast_join_min_mb`` no join side is broadcast by its size (a
hint still is). The session's own settings come back when the epoch ends.
"""

from __future__ import annotations

import yaml
from pyspark.sql import functions as F

from epochal.config import SparkSettings
from epochal.pipeline.sources import planned_bytes
from epochal.pipeline.steps import compiled_classes
from epochal.state.epoch_conf import BROADCAST_THRESHOLD, INTERPRETED, code_generation, join_strategy
from tests.pipeline.test_runner import EXPECTED_LOG, EXPECTED_TOTALS, _deploy, _runner, _sinks

MB = 1024 * 1024


def _query(spark, constant: int):
    # A long literal is inlined into generated Java: a constant not used before is new code to compile.
    return spark.range(6).select((F.col("id") * 3 + F.lit(constant)).alias("x")).where(F.col("x") % 2 == 0)


def test_planned_bytes_are_known_only_for_sources_that_list_their_files():
    recorded = {"files": ["a", "b"], "fingerprints": {"a": {"size": 10, "mtime": 1.0}, "b": {"size": 5, "mtime": 2.0}}}
    assert planned_bytes(recorded) == 15
    assert planned_bytes({"files": [], "fingerprints": {}}) == 0  # an empty hour
    assert planned_bytes({"fraction": 0.5, "fingerprints": {}}) is None  # data made by the source: unknown
    assert planned_bytes({"files": ["a"]}) is None  # a plan recorded before fingerprints
    assert planned_bytes({"files": ["a"], "fingerprints": {"a": None}}) is None  # the file is gone


def test_below_the_threshold_nothing_is_compiled_and_the_session_gets_its_settings_back(spark, generated_code):
    settings = SparkSettings(master="local[2]", codegen_min_mb=1)
    before = {key: spark.conf.get(key) for key in INTERPRETED}
    constant = 9_180_000_000 + compiled_classes(spark)  # a literal no other test compiled

    with code_generation(spark, settings, MB - 1) as mode:
        assert mode == "interpreted"
        start = compiled_classes(spark)
        interpreted = sorted(r.x for r in _query(spark, constant).collect())
        assert compiled_classes(spark) == start
    assert {key: spark.conf.get(key) for key in INTERPRETED} == before

    with code_generation(spark, settings, MB) as mode:  # at the threshold: generated
        assert mode == "generated"
        start = compiled_classes(spark)
        generated = sorted(r.x for r in _query(spark, constant).collect())
        assert compiled_classes(spark) > start
    assert interpreted == generated == [constant + 3 * i for i in range(6) if (constant + 3 * i) % 2 == 0]
    assert {key: spark.conf.get(key) for key in INTERPRETED} == before


def test_an_unknown_size_a_zero_threshold_and_the_configurations_own_setting(spark, generated_code):
    with code_generation(spark, SparkSettings(master="local[2]"), None) as mode:
        assert mode == "generated"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    with code_generation(spark, SparkSettings(master="local[2]", codegen_min_mb=0), 0) as mode:
        assert mode == "generated"
    own = SparkSettings(master="local[2]", conf={"spark.sql.codegen.wholeStage": "false"})
    before = spark.conf.get("spark.sql.codegen.factoryMode")
    with code_generation(spark, own, 0) as mode:
        assert mode == "spark.conf"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == before  # left alone


def _joins(frame) -> set[str]:
    plan = frame._jdf.queryExecution().executedPlan().toString()
    return {kind for kind in ("BroadcastHashJoin", "BroadcastNestedLoopJoin", "SortMergeJoin") if kind in plan}


def _join_query(spark, hint: bool = False):
    left = spark.range(20).select((F.col("id") % 7).alias("k"), F.col("id").alias("a"))
    right = spark.range(5).select(F.col("id").alias("k"), (F.col("id") * 10).alias("b"))
    return left.join(F.broadcast(right) if hint else right, "k")


def test_below_the_join_threshold_no_side_is_broadcast_by_size_but_a_hint_still_is(spark):
    settings = SparkSettings(master="local[2]", broadcast_join_min_mb=1)
    before = spark.conf.get(BROADCAST_THRESHOLD)
    with join_strategy(spark, settings, MB - 1) as joins:
        assert joins == "shuffle"
        shuffled = _join_query(spark)
        assert _joins(shuffled) == {"SortMergeJoin"}
        assert _joins(_join_query(spark, hint=True)) == {"BroadcastHashJoin"}
        by_shuffle = sorted(tuple(r) for r in shuffled.collect())
    assert spark.conf.get(BROADCAST_THRESHOLD) == before
    with join_strategy(spark, settings, MB) as joins:  # at the threshold: Spark's own rule, which broadcasts these
        assert joins == "auto"
        broadcast = _join_query(spark)
        assert _joins(broadcast) == {"BroadcastHashJoin"}
        assert sorted(tuple(r) for r in broadcast.collect()) == by_shuffle
    assert len(by_shuffle) == sum(1 for i in range(20) if i % 7 < 5)
    with join_strategy(spark, SparkSettings(master="local[2]"), None) as joins:  # unknown size
        assert joins == "auto"
    own = SparkSettings(master="local[2]", conf={BROADCAST_THRESHOLD: "1024"})
    with join_strategy(spark, own, 0) as joins:
        assert joins == "spark.conf" and spark.conf.get(BROADCAST_THRESHOLD) == before  # left alone


def test_an_epoch_interpreted_and_one_generated_write_the_same_sinks(spark, tmp_path, toy_registered, generated_code):
    reports, sinks = {}, {}
    for name, threshold in (("interpreted", 8), ("generated", 0)):
        config = _deploy(tmp_path / name)
        settings = yaml.safe_load(config.read_text())
        settings["spark"]["codegen_min_mb"] = threshold
        settings["spark"]["broadcast_join_min_mb"] = threshold
        config.write_text(yaml.safe_dump(settings))
        runner = _runner(spark, config)
        reports[name] = runner.run(to="2026-11-01-03:00").epochs
        sinks[name] = _sinks(runner)

    hours = [tmp_path / "interpreted" / "landing" / f"dt=2026-11-01/hour={h:02d}" / "part-0000.jsonl" for h in range(4)]
    assert [e.input_bytes for e in reports["interpreted"]] == [p.stat().st_size for p in hours]
    assert [e.code for e in reports["interpreted"]] == ["interpreted"] * 4
    assert [e.code for e in reports["generated"]] == ["generated"] * 4
    assert sum(e.compiled_classes for e in reports["generated"]) > 0  # Spark's code generation ran
    assert [e.joins for e in reports["interpreted"]] == ["shuffle"] * 4
    assert [e.joins for e in reports["generated"]] == ["auto"] * 4
    assert sinks["interpreted"] == sinks["generated"] == (EXPECTED_TOTALS, EXPECTED_LOG)
