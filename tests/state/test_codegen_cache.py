"""Spark's generated code is compiled once per session, not once per epoch.

An epoch runs a few hundred distinct generated classes (a MERGE per state and sink, Delta's log
queries). Spark caches compiled classes in a cache of ``spark.sql.codegen.cache.maxEntries``
(static, default 100); with the default every warm epoch of the example compiled them all again.
epochal's sessions keep enough entries for a query run again after hundreds of others to reuse
its class: what a warm epoch does with the MERGE it ran an epoch before.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from epochal.config import SparkSettings
from epochal.pipeline.steps import compiled_classes
from epochal.state.session import CODEGEN_CACHE_ENTRIES, spark_conf

OTHERS = 150  # more distinct queries than Spark's default cache holds


def _query(spark, constant: int):
    # A long literal is inlined into the generated Java source: each constant is a class of its own.
    return spark.range(4).select((F.col("id") * 7 + F.lit(constant)).alias("x")).where(F.col("x") > -1)


def test_a_query_run_again_after_many_others_is_not_compiled_again(spark, generated_code):
    assert int(spark.conf.get("spark.sql.codegen.cache.maxEntries")) == CODEGEN_CACHE_ENTRIES

    before = compiled_classes(spark)
    first = _query(spark, 9_876_543_210).collect()
    assert compiled_classes(spark) > before  # its code was new: compiled

    for constant in range(OTHERS):
        _query(spark, 1_234_567_000 + constant).collect()
    assert compiled_classes(spark) - before > OTHERS  # each of them compiled too

    again = compiled_classes(spark)
    assert _query(spark, 9_876_543_210).collect() == first
    assert compiled_classes(spark) == again  # still in the cache: nothing compiled


def test_the_cache_size_is_a_default_the_configuration_can_override():
    settings = SparkSettings(master="local[2]")
    assert spark_conf(settings)["spark.sql.codegen.cache.maxEntries"] == str(CODEGEN_CACHE_ENTRIES)
    assert CODEGEN_CACHE_ENTRIES > 100  # Spark's default
    custom = SparkSettings(master="local[2]", conf={"spark.sql.codegen.cache.maxEntries": "500"})
    assert spark_conf(custom)["spark.sql.codegen.cache.maxEntries"] == "500"
