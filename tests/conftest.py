"""Shared fixtures: one SparkSession (Delta configured) for the whole test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Python workers unpickle functions defined in test modules by reference: let them import tests.
_TESTS = str(Path(__file__).resolve().parent)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TESTS, os.environ.get("PYTHONPATH", "")) if p)

from epochal.config import SparkSettings


@pytest.fixture(scope="session")
def spark():
    from epochal.state.session import build_spark_session

    session = build_spark_session(
        SparkSettings(master="local[2]", parallelism=2, shuffle_partitions=2, driver_memory="2g"),
        app_name="epochal-tests",
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone cluster on loopback: a master and two workers of 1 core and 1g each."""
    from spark_cluster import StandaloneCluster

    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="1g")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """An S3-compatible server on loopback (moto's server in its own process); yields its endpoint URL."""
    from s3_server import MotoServer

    server = MotoServer(tmp_path_factory.mktemp("moto"))
    try:
        yield server.start()
    finally:
        server.stop()
