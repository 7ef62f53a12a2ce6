"""The Spark settings epochal picks for small, frequent epochs, and that a configuration can undo them.

An epoch of a few thousand rows spends its time planning, not computing: adaptive query execution
re-plans every query stage, and PySpark's DataFrame debugging makes several JVM round trips for
each Column function a stage calls; Delta writes a checksum file after every commit. All are off by default (bench/README.md has the measurements);
``spark.conf`` in the configuration turns them back on.
"""

from __future__ import annotations

import re

from pyspark.errors.utils import is_debugging_enabled
from pyspark.sql import functions as F

from epochal.config import SparkSettings
from epochal.state.session import spark_conf

SMALL_EPOCH_DEFAULTS = {
    "spark.sql.adaptive.enabled": "false",
    "spark.databricks.delta.writeChecksumFile.enabled": "false",
    "spark.sql.ui.explainMode": "simple",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def test_the_session_runs_queries_without_adaptive_replanning(spark):
    for key, value in SMALL_EPOCH_DEFAULTS.items():
        assert spark.conf.get(key) == value, key
    left = spark.range(50).withColumn("k", F.col("id") % 5)
    right = spark.range(5).withColumnRenamed("id", "k")
    joined = left.join(right, "k").groupBy("k").count()
    plan = joined._jdf.queryExecution().executedPlan().toString()
    assert "AdaptiveSparkPlan" not in plan
    assert sorted(r["count"] for r in joined.collect()) == [10] * 5


def test_delta_commits_write_no_checksum_file_and_the_table_still_opens_everywhere(spark, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)
    log = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir())
    # Delta's version checksums are <version>.crc (Hadoop's own .<file>.crc guard each local file: not these)
    assert "00000000000000000001.json" in log and not [name for name in log if re.fullmatch(r"\d{20}\.crc", name)]
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 1, 2, 3, 4]
    assert DeltaTable(path).version() == 1 and sorted(DeltaTable(path).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_pyspark_does_not_record_python_call_sites(spark):
    assert is_debugging_enabled() is False


def test_a_configuration_can_turn_them_back_on():
    assert {k: spark_conf(SparkSettings(master="local[2]"))[k] for k in SMALL_EPOCH_DEFAULTS} == SMALL_EPOCH_DEFAULTS
    back = {key: "true" for key in ("spark.sql.adaptive.enabled", "spark.python.sql.dataFrameDebugging.enabled")}
    conf = spark_conf(SparkSettings(master="local[2]", conf={**back, "spark.sql.ui.explainMode": "formatted"}))
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert conf["spark.python.sql.dataFrameDebugging.enabled"] == "true"
    assert conf["spark.sql.ui.explainMode"] == "formatted"
