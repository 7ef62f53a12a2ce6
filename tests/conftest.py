"""Shared fixtures: one SparkSession (Delta configured) for the whole test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Python workers unpickle functions defined in test modules by reference: let them import tests.
_TESTS = str(Path(__file__).resolve().parent)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_TESTS, os.environ.get("PYTHONPATH", "")) if p)

from config import SparkSettings


@pytest.fixture(scope="session")
def spark():
    from state.session import build_spark_session

    session = build_spark_session(
        SparkSettings(master="local[2]", parallelism=2, shuffle_partitions=2, driver_memory="2g"),
        app_name="epochal-tests",
    )
    yield session
    session.stop()
