"""The one way to build a SparkSession with Delta Lake configured.

Delta's jars are resolved the way Spark does it: ``spark.jars.packages`` (set
up by delta's own pip helper) fetches them from Maven Central through Ivy into
the local Ivy cache, once. A deployment with a location on S3 adds Hadoop's
S3A connector the same way (``epochal.state.delta.objectstore``). ``python -m epochal.state.session
--warm`` resolves both ahead of time (the Makefile's set-up step), so neither
a test nor a run downloads jars. The same step leaves a class-data-sharing
archive that every session's driver JVM maps to start faster
(:mod:`epochal.state.jvm_archive`), and the first session to resolve a list of
packages records the files Ivy gave, which later sessions name directly
(:mod:`epochal.state.resolved_jars`; a local one puts them on its driver's
class path, :mod:`epochal.state.driver_jars`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from epochal.config import Gc, Jit, SparkSettings
from epochal.state import jvm_archive, jvm_view, resolved_jars
from epochal.state.errors import SparkStartError
from epochal.state.master import check_master_reachable
from epochal.state.driver_jars import default_class_path, delta_packages, driver_class_path, is_local, launcher_class_path
from epochal.state.delta.objectstore import S3A_PACKAGES, s3a_conf, spark_packages, uses_s3

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: Entries of Spark's generated-class cache: a few epochs' worth of distinct generated code (Spark's default: 100).
CODEGEN_CACHE_ENTRIES = 2048

#: Delta writes a version checksum file (``<version>.crc``: the table's protocol, metadata, file count and size)
#: after each commit when this is true.
CHECKSUM_FILES = "spark.databricks.delta.writeChecksumFile.enabled"

#: The settings every session gets whatever the configuration (its ``spark.conf`` still overrides each).
SESSION_DEFAULTS = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    "spark.ui.showConsoleProgress": "false",
    # Epochs are small and shuffle partitions are already sized to the cores: adaptive execution's
    # re-planning of every query stage cost more than it saved (a warm 60-event epoch of the example
    # 16.6 s with it, 14.5 s without; docs/performance.md). Epochs of millions of rows may want it back
    # (spark.conf: {spark.sql.adaptive.enabled: "true"}), as Structured Streaming turns it off too.
    "spark.sql.adaptive.enabled": "false",
    # The Spark UI's plan text for every SQL execution, in its cheapest form (default: formatted).
    "spark.sql.ui.explainMode": "simple",
    # PySpark's DataFrame debugging records the Python call site of every Column function (several
    # JVM round trips and a stack walk each, some 1.3 ms per F.col); stages build many columns.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
    # Parquet timestamps as INT64 microseconds, Delta's own type, not Spark's legacy INT96 (nanoseconds to
    # other readers): delta-rs refused a sink holding a year past 2262 ("would lose data"; found from outside).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Python workers run the interpreter that runs the driver (the virtualenv's).
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    # Delta's version checksum file (.crc) after every commit: one more file written and renamed per commit,
    # and warm epochs were faster without it in seven alternating rounds of nine (docs/performance.md).
    # A run's last epoch writes them (epoch_conf.checksum_files): the versions the next process opens first.
    CHECKSUM_FILES: "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    # MapState puts: a later entry for the same map key wins.
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    # Spark's cache of generated classes (static: only at start). An epoch of the example runs about 570
    # generated classes (a MERGE per state and sink, Delta's own log queries); with Spark's default of 100
    # entries every warm epoch compiled them all again with Janino; with this one a warm epoch compiles
    # only the code that differs (literals that change each epoch): about 60 (bench/README.md).
    "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
    # Delta commits to local paths without FileContext. Without Hadoop's native library (PySpark ships none), the
    # FileContext rename of Delta's default log store runs a ``readlink`` process for each path it checks (the
    # commit, its temporary file and their ``.crc`` siblings): 35 of the 57 processes an epoch of the toy pipeline
    # started, 5 ms each (docs/performance.md). Delta's log store for local paths writes the same temporary file
    # and renames it with the file system's own rename, after the same check that the version is still free (on a
    # local disk neither store's check and rename is one atomic step). Hadoop's raw local file system would save
    # the ``chmod`` of each file created as well, but S3A (its upload buffers) needs the checksummed one.
    "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
}


#: Set in the driver's environment before its JVM starts, which inherits it: the driver's process id. A driver
#: killed by SIGKILL leaves its JVM running for a few seconds, maybe in the middle of a Delta commit; the next
#: run on the host finds that JVM by it and stops it before it takes over the deployment (pipeline/lease.py).
DRIVER_PID_ENV = "EPOCHAL_DRIVER_PID"

#: HotSpot's C1 compiler alone, with the code cache tiered compilation would have (C1 alone gets 48 MB,
#: which an epoch of the example fills: its sweeper then flushes and recompiles).
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: The most epochs a run may have for ``spark.jit: auto`` to choose the quick compiler.
SHORT_RUN_EPOCHS = 2
#: A run of a few epochs whose input is known and tiny runs C1 alone too: its epochs are mostly the fixed driver
#: work (planning, Delta's log) that C2 would compile for and never repay. Three to eight epochs of 40 events
#: (12 KB) each in a fresh process, C1 alone against tiered: 31.7/32.5 s (3), 50.8/53.9 s (6), 63.7/63.9 s (8)
#: on a quiet machine, with a third less CPU (36/53, 58/84, 72/98 CPU-seconds: the test suite's two workers
#: share two cores); at 5k events (760 KB) an epoch, tiered is faster from the third (docs/performance.md).
TINY_RUN_EPOCHS = 8
TINY_RUN_INPUT_BYTES = 1024 * 1024


def is_short_run(settings: SparkSettings, epochs: int, state_bytes: int, input_bytes: int | None = None) -> bool:
    """Whether ``spark.jit: auto`` starts the driver with the quick compiler for a run of ``epochs`` epochs.

    In a fresh JVM, C2 (the optimizing compiler) spends more CPU than the epoch itself: an epoch of the
    example at 5k events used 24 s of C2 time and 15 s on the driver's main thread, on two cores
    (docs/performance.md). C1 alone compiles a fraction of that and makes the first epoch and the start faster, but
    its code is slower once warm: from the third epoch on, and for large data, tiered compilation wins, unless
    the run's input is known to be tiny (``input_bytes``, the sources' files of all its epochs: see
    :data:`TINY_RUN_INPUT_BYTES`), when it takes up to :data:`TINY_RUN_EPOCHS`.
    """
    if epochs <= 0 or state_bytes >= settings.codegen_min_mb * 1024 * 1024:
        return False
    tiny = input_bytes is not None and input_bytes < TINY_RUN_INPUT_BYTES
    return epochs <= SHORT_RUN_EPOCHS or (tiny and epochs <= TINY_RUN_EPOCHS)


def jit_conf(settings: SparkSettings, conf: Mapping[str, str], *, short: bool) -> dict[str, str]:
    """The driver JVM options ``spark.jit`` asks for, added to the ones ``conf`` already has."""
    quick = settings.jit is Jit.QUICK or (settings.jit is Jit.AUTO and short)
    return _driver_option(conf, QUICK_JIT) if quick else {}


def _driver_option(conf: Mapping[str, str], option: str) -> dict[str, str]:
    """``option`` added to the driver JVM's default options ``conf`` already has."""
    return {jvm_archive.OPTION: f"{conf.get(jvm_archive.OPTION, '')} {option}".strip()}


#: HotSpot's throughput collector (``spark.gc: parallel``). A warm epoch of the example at 5k events spent some
#: 6 s of CPU in G1's concurrent marking and GC threads, and its driver thread paid G1's write barriers: with
#: this one its JVM used 26-30 s of CPU instead of 36, and the epoch took 19 s instead of 24 (docs/performance.md).
PARALLEL_GC = "-XX:+UseParallelGC"
#: Where else a collector can be chosen: the JVM refuses to start with two.
_COLLECTOR = re.compile(r"-XX:\+Use\w+GC\b")
_JAVA_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")


def gc_conf(settings: SparkSettings, conf: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The driver JVM option ``spark.gc`` asks for, added to the ones ``conf`` already has; none when a collector
    is already named (``spark.conf``'s driver Java options, the JVM's environment variables)."""
    if settings.gc is not Gc.PARALLEL:
        return {}
    elsewhere = [settings.conf.get(k, "") for k in (jvm_archive.OPTION, "spark.driver.extraJavaOptions")]
    elsewhere += [environ.get(name, "") for name in _JAVA_ENV]
    if any(_COLLECTOR.search(options) for options in elsewhere):
        return {}
    return _driver_option(conf, PARALLEL_GC)


def driver_gc(spark: Any) -> list[str]:
    """The names of the driver JVM's collectors (``PS Scavenge``, ``G1 Young Generation``...); [] without a session."""
    spark = started_session(spark)
    if spark is None:
        return []
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return [str(bean.getName()) for bean in beans]


def driver_jit(spark: Any) -> str | None:
    """``quick`` or ``tiered``: the compilers the driver's JVM runs (its command line), None without a session."""
    spark = started_session(spark)
    if spark is None:
        return None
    arguments = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return "quick" if any(str(a) == "-XX:TieredStopAtLevel=1" for a in arguments) else "tiered"


def _on_loopback(master: str) -> bool:
    """A local master, or a standalone master on this machine's loopback (``spark://127.0.0.1:7077``)."""
    host = master.split("://", 1)[-1].rsplit(":", 1)[0]
    return is_local(master) or (master.startswith("spark://") and host in ("127.0.0.1", "localhost"))


def _local_cores(master: str) -> int:
    inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    if inner in ("*", ""):
        return os.cpu_count() or 1
    try:
        return max(1, int(inner.split(",")[0]))
    except ValueError:
        return os.cpu_count() or 1


def spark_conf(
    settings: SparkSettings,
    *,
    app_name: str = "epochal",
    locations: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    short_run: bool = False,
) -> dict[str, str]:
    """The full Spark configuration epochal runs with (pure: testable without a JVM).

    ``locations`` are the deployment's storage roots: one on S3 adds the S3A
    settings derived from ``environ`` (endpoint, region; never credentials).
    ``short_run``: the process runs a short run (:func:`is_short_run`), for ``spark.jit: auto``.
    """
    cores = _local_cores(settings.master) if is_local(settings.master) else settings.parallelism
    shuffle = settings.shuffle_partitions or max(settings.parallelism, cores)
    conf = {
        **SESSION_DEFAULTS,
        "spark.app.name": app_name,
        "spark.master": settings.master,
        "spark.ui.enabled": str(settings.ui_enabled).lower(),
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.shuffle.partitions": str(shuffle),
        "spark.default.parallelism": str(settings.parallelism),
        # Small state tables: few partitions to rebuild a Delta snapshot.
        "spark.databricks.delta.snapshotPartitions": str(max(2, shuffle)),
    }
    if _on_loopback(settings.master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if uses_s3(locations):
        conf.update(s3a_conf(os.environ if environ is None else environ))
    ivy = os.environ.get("EPOCHAL_IVY_DIR")
    if ivy:
        conf["spark.jars.ivy"] = ivy
    conf.update(jvm_archive.use_options(os.environ if environ is None else environ))
    conf.update(jit_conf(settings, conf, short=short_run))
    conf.update(gc_conf(settings, conf, os.environ if environ is None else environ))
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


def build_spark_session(
    settings: SparkSettings | None = None,
    *,
    app_name: str = "epochal",
    locations: Sequence[str] = (),
    short_run: bool = False,
    remember_lookups: bool = True,
):
    """Return the process's SparkSession with Delta configured (created once per JVM).

    ``locations`` (landing, warehouse, checkpoints...) decide the extra jars:
    the S3A connector when one of them is on S3. ``short_run``: see :func:`spark_conf`. ``remember_lookups``:
    the driver's py4j view keeps the JVM classes it looked up (:func:`_import_helpers`); False leaves PySpark's
    driver as it comes (the benchmark's Structured Streaming job, as a Spark user runs it).
    """
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = spark_conf(settings, app_name=app_name, locations=locations, short_run=short_run)
    check_master_reachable(conf["spark.master"])
    extra = [p for p in settings.conf.get(resolved_jars.PACKAGES, "").split(",") if p]
    extra += [p for p in spark_packages(locations) if p not in extra]
    conf[resolved_jars.PACKAGES] = delta_packages(extra)
    jars = resolved_jars.recorded(conf)
    class_path: list[str] = []
    if jars is not None:  # resolved before: name the files, as Spark's launcher would after resolving
        del conf[resolved_jars.PACKAGES]
        class_path = driver_class_path(conf["spark.master"], jars, ivy=conf.get(resolved_jars.IVY))
        if not class_path:
            conf[resolved_jars.JARS] = ",".join(jars)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    preload = _preload_while_the_jvm_starts()
    os.environ[DRIVER_PID_ENV] = str(os.getpid())  # the JVM's environment names its driver (see the constant)
    with _jvm_stdout_to_stderr(), launcher_class_path(class_path):
        try:
            spark = builder.getOrCreate()
        except Exception as exc:  # py4j's "An error occurred while calling None....SparkSession" names neither
            raise SparkStartError(conf["spark.master"], exc) from exc
    if preload is not None:
        preload.join()
    started = spark.sparkContext.getConf()
    if jars is None and started.get(resolved_jars.PACKAGES, None) == conf[resolved_jars.PACKAGES]:
        resolved_jars.remember(conf, started.get(resolved_jars.JARS, None))  # this session resolved them
    level = os.environ.get("EPOCHAL_SPARK_LOG_LEVEL", "ERROR")
    spark.sparkContext.setLogLevel(level)
    _quiet_query_context_loggers(level)
    if remember_lookups:
        _import_helpers(spark)
    return spark


#: PySpark's loggers that print a failed DataFrame or SQL query's error, as one JSON line holding its whole Java
#: stack (tens of KB on stderr), when the exception is made, before any caller handles it. epochal reports the
#: same error itself, in one line naming the stage or sink and the epoch (``EPOCHAL_LOG_LEVEL=DEBUG`` adds the
#: traceback), so they are quiet unless ``EPOCHAL_SPARK_LOG_LEVEL`` asks for more than Spark's errors.
QUERY_CONTEXT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def _quiet_query_context_loggers(level: str) -> None:
    if level.upper() not in ("ERROR", "FATAL", "OFF"):
        return
    from pyspark.logger import PySparkLogger  # its class, so that PySpark's own calls with context keep working

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


#: The module a new driver would import with its JVM waiting: PySpark's py4j argument converters import it on the
#: first conversion (the ``SparkConf`` of a new context), and it imports pandas (0.3 s). Imported on a thread while
#: the JVM starts, where the driver only polls for the JVM's port.
_PRELOAD = "pyspark.testing.utils"


def _preload_while_the_jvm_starts() -> threading.Thread | None:
    """Start importing :data:`_PRELOAD` on a thread if this process starts a JVM now; the thread, or None."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or _PRELOAD in sys.modules:
        return None
    thread = threading.Thread(target=_import_quietly, args=(_PRELOAD,), name="epochal-preload", daemon=True)
    thread.start()
    return thread


def _import_quietly(name: str) -> None:
    """Import ``name``; a failure is left for the import that needs the module to raise, in its place."""
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - only a head start: the converter's own import reports the error
        pass


#: The JVM classes PySpark names by their short names on every ``F.*`` call and column conversion. py4j finds a
#: short name through the gateway's star imports in turn, each miss a class-loader search of every jar (about
#: 2 ms a lookup); imported by full name, the first lookup finds it, and the view remembers it from then on.
_HELPER_CLASSES = ("org.apache.spark.api.python.PythonUtils", "org.apache.spark.sql.api.python.PythonSQLUtils")


def _import_helpers(spark) -> None:
    """The driver's py4j view of the JVM with PySpark's helper classes imported by full name, remembering the
    classes and static methods it looks up (:mod:`epochal.state.jvm_view`)."""
    from py4j.java_gateway import java_import

    jvm = getattr(spark.sparkContext, "_jvm", None)
    if jvm is not None:
        for name in _HELPER_CLASSES:
            java_import(jvm, name)
        jvm_view.remember(jvm)


class LazySparkSession:
    """The process's SparkSession, started on first use (attribute access).

    For commands that may need no Spark at all: a savepoint of small state is
    copied by delta-rs and starts no JVM; one that must restore first, or copy
    large state, starts Spark then. :func:`started_session` tells the two apart
    without starting it.
    """

    def __init__(self, factory: Callable[..., Any]) -> None:
        self._factory = factory
        self._session: Any = None
        self._short_run: bool | None = None

    def expect(self, *, short_run: bool) -> None:
        """Say, before the session starts, whether the process runs a short run (``spark.jit: auto``);
        the factory gets it as ``short_run=``. Too late once started: then it changes nothing."""
        self._short_run = short_run

    @property
    def started(self) -> bool:
        return self._session is not None

    @property
    def expected(self) -> bool:
        """Whether :meth:`expect` was called."""
        return self._short_run is not None

    def get(self) -> Any:
        if self._session is None:
            self._session = self._factory(short_run=bool(self._short_run))
        return self._session

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.get(), name)


def started_session(spark: Any) -> Any:
    """``spark`` itself, the session behind a started :class:`LazySparkSession`, or None (no Spark, not started)."""
    return spark._session if isinstance(spark, LazySparkSession) else spark


def _warm(config_path: str | None = None) -> int:
    """Resolve and cache the Delta and S3A jars, prove Delta works, and write the JVM's class archive.

    With ``config_path``, the extra packages of that configuration's
    ``spark.conf["spark.jars.packages"]`` are resolved too, so that a session
    built from that configuration later finds every jar cached. Each list of
    packages is resolved in a JVM of its own (Spark's launcher resolves before
    the JVM starts). When this environment has no class-data-sharing archive
    yet (:mod:`epochal.state.jvm_archive`), a last JVM, with Delta's jars on its
    class path as every later local session has them, writes one as it exits,
    after a small Delta workload.
    """
    packages = list(S3A_PACKAGES)
    if config_path:
        from epochal.config import load_settings

        configured = load_settings(config_path, env={}).spark.conf.get("spark.jars.packages", "")
        packages += [p for p in str(configured).split(",") if p and p not in packages]
    conf = {"spark.jars.packages": ",".join(packages)}
    spark = build_spark_session(SparkSettings(master="local[1]", conf=conf), app_name="epochal-warm")
    spark._jvm.org.apache.spark.util.Utils.classForName("org.apache.hadoop.fs.s3a.S3AFileSystem", True, False)
    _stop(spark)
    if not default_class_path(os.environ.get("EPOCHAL_IVY_DIR")):  # Delta's own list: a session resolves it
        _stop(build_spark_session(SparkSettings(master="local[1]"), app_name="epochal-warm"))
    archive = jvm_archive.archive_path()
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial") if archive and not archive.exists() else None
    dump: dict[str, str] = {}
    if partial is not None:
        partial.parent.mkdir(parents=True, exist_ok=True)
        dump = jvm_archive.dump_options(partial)
    spark = build_spark_session(SparkSettings(master="local[1]", conf=dump), app_name="epochal-warm")
    rows, version = _delta_workload(spark), spark.version
    code = _stop(spark)
    if partial is not None:
        if code == 0 and partial.is_file():
            jvm_archive.keep(partial, archive)
        partial.unlink(missing_ok=True)
    kept = f"; JVM class archive {archive}" if archive and archive.is_file() else ""
    print(f"Delta ready (spark {version}, with {conf['spark.jars.packages']}, {rows} rows read back{kept})",
          file=sys.stderr)
    return 0 if rows == 3 else 1


def _stop(spark) -> int | None:
    """Stop ``spark`` and its JVM (the next session of this process starts another); the JVM's exit code."""
    spark.stop()
    return jvm_archive.stop_jvm()


def _delta_workload(spark) -> int:
    """What an epoch does to Delta, in miniature (so that the archive holds its classes); rows read back."""
    import tempfile

    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from epochal.state.delta.io import STATE_TABLE_PROPERTIES
    from epochal.state.delta.tables import create_table

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/t"
        create_table(spark, path, T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())]),
                     STATE_TABLE_PROPERTIES)
        spark.range(3).selectExpr("id AS k", "id AS v").write.format("delta").mode("append").save(path)
        source = spark.range(2, 5).selectExpr("id AS k", "id * 2 AS v")
        source = source.withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("k"))).groupBy("k").agg(F.max("v").alias("v"))
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k")
         .whenMatchedDelete("s.v > 8").whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute())
        DeltaTable.forPath(spark, path).delete("k = 0")
        spark.read.format("delta").option("versionAsOf", 1).load(path).join(source, "k", "left_anti").count()
        DeltaTable.forPath(spark, path).restoreToVersion(1)
        return spark.read.format("delta").load(path).count()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warm", action="store_true", help="resolve the Delta and S3A jars and check Delta works")
    parser.add_argument(
        "--config", metavar="PATH", default=None,
        help="with --warm: also resolve the spark.jars.packages of this configuration's spark.conf",
    )
    args = parser.parse_args()
    sys.exit(_warm(args.config) if args.warm else 0)
