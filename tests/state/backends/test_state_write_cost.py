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


def test_bytes_added_between_two_checkpoints_leave_out_rolled_back_writes_and_restored_files(spark, tmp_path):
    """A checkpoint's "written" figure counted every commit since the previous one: an attempt a restore rolled back,
    and the files the RESTORE commit added back (written long before), five times a 5 KiB state (probe 18)."""
    from epochal.state.delta import io as delta_io
    from epochal.state.delta.log import DeltaLog

    path = str(tmp_path / "t")
    rows = lambda n, at: spark.range(at, at + n).select(F.col("id").alias("key"), (F.col("id") * 7).alias("value"))
    rows(500, 0).coalesce(1).write.format("delta").save(path)  # v0: the previous checkpoint's version
    rows(500, 1000).coalesce(1).write.format("delta").mode("overwrite").save(path)  # v1: an attempt...
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 0")  # v2: ...rolled back, v0's file added back
    rows(10, 5000).coalesce(1).write.format("delta").mode("append").save(path)  # v3: the checkpointed epoch's write
    log = DeltaLog(path)
    live = {f.path: f.size for f in log.snapshot(3).files}
    before = {f.path for f in log.snapshot(0).files}
    assert delta_io.bytes_added_between(path, 1, 3) == sum(size for p, size in live.items() if p not in before) > 0
    assert delta_io.bytes_added_between(path, 1, 2) == 0  # the restored version: nothing new
    assert delta_io.bytes_added_between(path, 0, 0) == delta_io.bytes_added(path, 0) == sum(
        f.size for f in log.snapshot(0).files)
