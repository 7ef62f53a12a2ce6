"""The Structured Streaming job epochal is compared with: the same work, the way a Spark user writes it.

``python -m bench.ss_job --landing DIR --work DIR --partitions P1,P2``: for each
partition, its landing files are made visible to the file source (hard links
into ``<work>/input``) and one ``Trigger.AvailableNow`` run of the query
processes them:

- the text file source, each line parsed and validated exactly as epochal's
  parse stage does it (:func:`~pipeline.examples.clickstream.parse.classify_lines`,
  Spark SQL) and the valid events kept;
- dedupe by ``event_id``: ``withWatermark(event_time, 7 days)`` then
  ``dropDuplicatesWithinWatermark`` (state in the RocksDB state store provider
  with changelog checkpointing);
- ``foreachBatch``: the batch's per-user and per-hour contributions
  (:mod:`~pipeline.examples.clickstream.transforms`) MERGEd into the Delta
  tables ``user_totals`` and ``hourly_revenue``, each MERGE idempotent on the
  batch id (Delta's ``txnAppId`` / ``txnVersion`` session settings).

The Spark settings are epochal's (:func:`epochal.state.session.build_spark_session`
with the benchmark's :func:`bench.common.spark_settings`) plus the state store
settings, and the process's last batch writes Delta's checksum files, as epochal's
last epoch of a run does. The driver is PySpark's as it comes, without the py4j
view epochal's sessions install (``EPOCHAL_BENCH_SS_DRIVER=epochal`` gives it that
view too). Prints one JSON line like :mod:`bench.epochal_job`.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench.common import Stopwatch, emit, memory_report, reset_jvm_peaks, spark_settings

STATE_STORE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
APP_ID = "epochal-bench-ss"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
#: ``pyspark``: PySpark's driver as it comes (the default); ``epochal``: with the py4j view epochal's sessions install.
SS_DRIVER = os.environ.get("EPOCHAL_BENCH_SS_DRIVER", "pyspark")


def link_partition(landing_files: list[str], input_dir: Path, partition: str) -> int:
    """Hard-link one partition's files into the source folder (a file source sees new files atomically)."""
    input_dir.mkdir(parents=True, exist_ok=True)
    prefix = partition.replace(":", "")  # Hadoop paths take no ':' in names
    for path in landing_files:
        target = input_dir / f"{prefix}-{Path(path).name}"
        if not target.exists():
            os.link(path, target)
    return len(landing_files)


def _ensure_tables(spark, warehouse: Path) -> dict[str, str]:
    from epochal.pipeline.examples.clickstream.stages import HOURLY_REVENUE_SCHEMA, USER_TOTALS_SCHEMA
    from epochal.state.delta import io as delta_io
    from epochal.state.delta.tables import create_table

    paths = {}
    for name, schema in (("user_totals", USER_TOTALS_SCHEMA), ("hourly_revenue", HOURLY_REVENUE_SCHEMA)):
        path = str(warehouse / name)
        if not delta_io.is_delta_table(path):
            create_table(spark, path, schema, {"delta.enableDeletionVectors": "true"})
        paths[name] = path
    return paths


def _merge(spark, path: str, rows, key: str, batch_id: int, updates: dict[str, str]) -> None:
    from delta.tables import DeltaTable

    spark.conf.set(TXN_APP_ID, f"{APP_ID}:{Path(path).name}")
    spark.conf.set(TXN_VERSION, str(batch_id))
    try:
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(rows.alias("s"), f"t.{key} = s.{key}")
            .whenMatchedUpdate(set=updates)
            .whenNotMatchedInsertAll()
            .execute()
        )
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def _writer(spark, paths: dict[str, str]):
    from pyspark import StorageLevel

    from epochal.pipeline.examples.clickstream.transforms import hourly_revenue_delta, user_totals_delta

    def add(*cols: str) -> dict[str, str]:
        return {c: f"t.{c} + s.{c}" for c in cols}

    user_updates = add("events", "purchases", "revenue") | {
        "first_event_time": "least(t.first_event_time, s.first_event_time)",
        "last_event_time": "greatest(t.last_event_time, s.last_event_time)",
    }

    def write_batch(batch, batch_id: int) -> None:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if batch.isEmpty():  # a no-data batch (the watermark moved): nothing to merge
                return
            _merge(spark, paths["user_totals"], user_totals_delta(batch), "user_id", batch_id, user_updates)
            _merge(spark, paths["hourly_revenue"], hourly_revenue_delta(batch), "hour", batch_id,
                   add("purchases", "revenue"))
        finally:
            batch.unpersist()

    return write_batch


def build_query(spark, input_dir: Path, work: Path):
    """The streaming query (not started)."""
    from pyspark.sql import functions as F

    from epochal.pipeline.examples.clickstream.parse import classify_lines

    input_dir.mkdir(parents=True, exist_ok=True)
    lines = spark.readStream.format("text").load(str(input_dir))
    classified = classify_lines(lines, F.input_file_name())
    events = classified.where(F.col("reason").isNull()).select("event_id", "user_id", "event_type", "amount", "event_time")
    distinct = events.withWatermark("event_time", "7 days").dropDuplicatesWithinWatermark(["event_id"])
    return (
        distinct.writeStream.foreachBatch(_writer(spark, _ensure_tables(spark, work / "warehouse")))
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
    )


def _progress(query) -> dict[str, Any]:
    batches = [p for p in query.recentProgress if p]
    state = [op for p in batches for op in p.get("stateOperators", [])]
    return {
        "batches": len(batches),
        "input_rows": sum(int(p.get("numInputRows", 0)) for p in batches),
        "state_rows": max((int(op.get("numRowsTotal", 0)) for op in state), default=0),
        "durations_ms": [p.get("durationMs", {}) for p in batches],
    }


def run(landing: str, work: Path, partitions: list[str]) -> dict[str, Any]:
    from epochal.pipeline.examples.clickstream.layout import partition_files
    from epochal.state.session import CHECKSUM_FILES, build_spark_session, is_short_run

    settings = spark_settings(**STATE_STORE_CONF)
    # The same choice of the driver's compilers as epochal's runner makes (spark.jit: auto), with the size of
    # the query's checkpoint (its RocksDB state and logs) as the state's size.
    state_bytes = sum(f.stat().st_size for f in (work / "checkpoint").rglob("*") if f.is_file())
    input_bytes = sum(Path(f).stat().st_size for p in partitions for f in partition_files(landing, p))
    short = is_short_run(settings, len(partitions), state_bytes, input_bytes)
    with Stopwatch() as setup:
        spark = build_spark_session(
            settings, app_name="epochal-bench-ss", short_run=short, remember_lookups=SS_DRIVER == "epochal"
        )
        writer = build_query(spark, work / "input", work)
    reset_jvm_peaks(spark)
    epochs = []
    for i, partition in enumerate(partitions):
        started = time.monotonic()
        if i == len(partitions) - 1:  # the process's last batch: its commits are what the next process opens first
            spark.conf.set(CHECKSUM_FILES, "true")
        link_partition(partition_files(landing, partition), work / "input", partition)
        query = writer.start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"streaming query failed: {query.exception()}")
        elapsed = round(time.monotonic() - started, 3)
        epochs.append({"partition": partition, "epoch_s": elapsed, "progress": _progress(query)})
    return {"side": "structured_streaming", "setup_s": setup.elapsed, "epochs": epochs, "memory": memory_report(spark)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--landing", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--partitions", required=True, help="comma-separated partition keys, in order")
    args = parser.parse_args()
    emit(run(args.landing, Path(args.work), args.partitions.split(",")))


if __name__ == "__main__":
    main()
