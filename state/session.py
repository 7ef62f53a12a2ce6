"""The one way to build a SparkSession with Delta Lake configured.

Delta's jars are resolved the way Spark does it: ``spark.jars.packages`` (set
up by delta's own pip helper) fetches them from Maven Central through Ivy into
the local Ivy cache, once. ``python -m state.session --warm`` does that ahead
of time (the Makefile's set-up step).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from config import SparkSettings

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def _is_local(master: str) -> bool:
    return master.startswith("local")


def _local_cores(master: str) -> int:
    inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    if inner in ("*", ""):
        return os.cpu_count() or 1
    try:
        return max(1, int(inner.split(",")[0]))
    except ValueError:
        return os.cpu_count() or 1


def spark_conf(settings: SparkSettings, *, app_name: str = "epochal") -> dict[str, str]:
    """The full Spark configuration epochal runs with (pure: testable without a JVM)."""
    cores = _local_cores(settings.master) if _is_local(settings.master) else settings.parallelism
    shuffle = settings.shuffle_partitions or max(settings.parallelism, cores)
    conf = {
        "spark.app.name": app_name,
        "spark.master": settings.master,
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.ui.enabled": str(settings.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.shuffle.partitions": str(shuffle),
        "spark.default.parallelism": str(settings.parallelism),
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        # Python workers run the interpreter that runs the driver (the virtualenv's).
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # Small state tables: few partitions to rebuild a Delta snapshot.
        "spark.databricks.delta.snapshotPartitions": str(max(2, shuffle)),
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # MapState puts: a later entry for the same map key wins.
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    }
    if _is_local(settings.master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    ivy = os.environ.get("EPOCHAL_IVY_DIR")
    if ivy:
        conf["spark.jars.ivy"] = ivy
    conf.update(settings.conf)
    return conf


@contextlib.contextmanager
def _jvm_stdout_to_stderr():
    """The JVM (and Ivy resolving jars) inherits our stdout: give it stderr, so stdout stays ours (--json)."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real fd 1 (embedded interpreters)
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def build_spark_session(settings: SparkSettings | None = None, *, app_name: str = "epochal"):
    """Return the process's SparkSession with Delta configured (created once per JVM)."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in spark_conf(settings, app_name=app_name).items():
        builder = builder.config(key, value)
    extra = [p for p in settings.conf.get("spark.jars.packages", "").split(",") if p]
    with _jvm_stdout_to_stderr():
        spark = configure_spark_with_delta_pip(builder, extra_packages=extra).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("EPOCHAL_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def _warm(config_path: str | None = None) -> int:
    """Resolve and cache the Delta jars, then prove Delta works with a tiny table.

    With ``config_path``, the extra packages of that configuration's
    ``spark.conf["spark.jars.packages"]`` (S3's hadoop-aws, say) are resolved too,
    so that a session built from that configuration later finds every jar cached.
    """
    import tempfile

    conf: dict[str, str] = {}
    if config_path:
        from config import load_settings

        packages = load_settings(config_path, env={}).spark.conf.get("spark.jars.packages")
        if packages:
            conf["spark.jars.packages"] = str(packages)
    spark = build_spark_session(SparkSettings(master="local[1]", conf=conf), app_name="epochal-warm")
    with tempfile.TemporaryDirectory() as tmp:
        spark.range(3).write.format("delta").save(f"{tmp}/t")
        rows = spark.read.format("delta").load(f"{tmp}/t").count()
    spark.stop()
    extra = f", with {conf['spark.jars.packages']}" if conf else ""
    print(f"Delta ready (spark {spark.version}{extra}, {rows} rows read back)", file=sys.stderr)
    return 0 if rows == 3 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warm", action="store_true", help="resolve the Delta jars and check Delta works")
    parser.add_argument(
        "--config", metavar="PATH", default=None,
        help="with --warm: also resolve the spark.jars.packages of this configuration's spark.conf",
    )
    args = parser.parse_args()
    sys.exit(_warm(args.config) if args.warm else 0)
