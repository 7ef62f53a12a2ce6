"""A small change to a large state adds bytes proportional to the change, not to the state."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.state.descriptors import ValueStateDescriptor
from epochal.state.backends.keyed import KeyedStateBackend

KEYS = 40_000


def _changed(spark, fraction: float, salt: int):
    step = int(1 / fraction)
    return spark.range(0, KEYS, step).select(
        F.format_string("user-%06d", F.col("id")).alias("key"),
        (F.col("id") * 1000 + F.lit(salt)).alias("value"),
    )


def test_bytes_added_scale_with_changed_keys(spark, tmp_path):
    d = ValueStateDescriptor("totals", value_type=T.LongType())
    backend = KeyedStateBackend(spark, str(tmp_path), "agg")
    backend.rewrite_below_bytes = 0  # the MERGE path (a table this small would be rewritten)
    backend.update(d, spark.range(KEYS).select(F.format_string("user-%06d", F.col("id")).alias("key"), F.col("id").alias("value")))
    full = backend.snapshot(d)

    backend.update(d, _changed(spark, 0.01, 1))
    one_percent = backend.snapshot(d)
    backend.update(d, _changed(spark, 0.10, 2))
    ten_percent = backend.snapshot(d)

    assert one_percent.rows == ten_percent.rows == KEYS
    # 1% of the keys changed: far less than the state is written (deletion vectors, no file rewrite)
    assert one_percent.bytes_added < 0.05 * full.bytes_total, (one_percent.bytes_added, full.bytes_total)
    assert ten_percent.bytes_added < 0.30 * full.bytes_total, (ten_percent.bytes_added, full.bytes_total)
    assert one_percent.bytes_added < ten_percent.bytes_added
    changed = spark.read.format("delta").load(backend.table_path(d)).where(F.col("updated_epoch") >= 0)
    assert changed.where(F.col("value") % 1000 == 2).count() >= KEYS // 10
