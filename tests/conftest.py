"""Shared fixtures: one SparkSession (Delta configured) for the whole test session."""

from __future__ import annotations

import pytest
from pyspark import cloudpickle

import tests
from epochal.config import SparkSettings
from epochal.state.epoch_conf import INTERPRETED

# Spark's Python workers cannot import the test package (it is not installed, and the test process sets
# no PYTHONPATH): functions and classes of tests.* modules (stages, trackers, UDFs) travel by value.
# The registration covers every submodule (tests.pipeline.test_runner, tests.support.toy_pipeline, ...).
cloudpickle.register_pickle_by_value(tests)


@pytest.fixture(scope="session")
def spark():
    from epochal.state.session import build_spark_session

    # C1 alone (``spark.jit: quick``): a test session runs thousands of small, different queries, and HotSpot's C2
    # kept compiling them on the core the other pytest worker needs. 46 epochs of the toy pipeline in one JVM:
    # 72 CPU-seconds with C1 alone against 98 and 117 tiered, in the same wall time (2026-12-01). The compilers
    # change no result.
    # Expressions evaluated interpreted, as a small epoch's are (epoch_conf.INTERPRETED), outside epochs too: with
    # Spark's default every task built the Java source of its projections again and stripped its comments with
    # regular expressions to look the class up, 62% of the task threads' samples in the state and sink tests, whose
    # JVM then used 206 CPU-seconds against 147 interpreted (docs/performance.md). The tests of generated code ask
    # for it (``generated_code``); epochs of the child processes keep the product's rules.
    session = build_spark_session(
        SparkSettings(master="local[2]", parallelism=2, shuffle_partitions=2, driver_memory="3g", jit="quick",
                      conf=dict(INTERPRETED)),
        app_name="epochal-tests",
    )
    yield session
    session.stop()


@pytest.fixture
def generated_code(spark):
    """The test session with Spark's own code generation while the test runs (it evaluates interpreted otherwise):
    the keys of ``INTERPRETED`` unset, so Spark's defaults apply."""
    before = {key: spark.conf.get(key) for key in INTERPRETED}
    for key in INTERPRETED:
        spark.conf.unset(key)
    yield spark
    for key, value in before.items():
        spark.conf.set(key, value)


@pytest.fixture(autouse=True)
def _forget_delta_logs():
    """After each test, drop Delta's cache of DeltaLog objects (snapshots and their cached state) and the
    frames the test left persisted.

    Delta's cache keeps one entry per table path for an hour: a product process reads a fixed set of tables,
    but the test session creates thousands, about 2 MB of driver heap each. A pipeline's last epoch leaves
    the frames its stages hold persisted, with physical plans that keep their broadcast relations alive.
    The shared driver ran out of memory late in a full run (a broadcast could not be built). Later tests
    use other paths and other frames; caching is transparent, so no result changes."""
    yield
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
        session.catalog.clearCache()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone cluster on loopback: a master and two workers of 1 core and 1g each."""
    from tests.support.spark_cluster import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="1g")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """An S3-compatible server on loopback (moto's server in its own process); yields its endpoint URL."""
    from tests.support.s3_server import MotoServer

    server = MotoServer(tmp_path_factory.mktemp("moto"))
    try:
        yield server.start()
    finally:
        server.stop()


def pytest_collection_modifyitems(config, items):
    """The slow tests first, those with the longest declared deadline (``pytest.mark.timeout``) first among them.

    ``make test`` runs the suite on two pytest-xdist workers (``--dist loadscope`` hands tests out in this order,
    see :func:`pytest_xdist_make_scheduler`):
    a long test started last would run alone at the end with the other worker idle. A plain run is unchanged
    but for the order; the tests do not depend on it."""

    def deadline(item) -> float:
        marker = item.get_closest_marker("timeout")
        return float(marker.args[0]) if marker and marker.args else float(config.getini("timeout") or 0)

    slow = [item for item in items if item.get_closest_marker("slow")]
    slow.sort(key=deadline, reverse=True)  # stable: collection order among equal deadlines
    rest = [item for item in items if not item.get_closest_marker("slow")]
    items[:] = slow + rest


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope``: one test at a time, but the tests sharing a module fixture together
    (tests/support/xdist_units.py). Other modes are pytest-xdist's own."""
    if config.getoption("dist") == "loadscope":
        from tests.support.xdist_units import ModuleFixtureScheduling

        return ModuleFixtureScheduling(config, log)
    return None
