"""The clickstream example end to end, for deployments elsewhere than local disk.

``epochal`` runs as its own process (its own JVM), as in ``test_cli_clickstream``;
the sinks are compared with the pure-Python reference computed from the same
landing files. Sinks on an object store are first copied to a local folder
(a Delta table is relocatable) and read there with the test's Spark session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import yaml

from epochal.pipeline.examples.clickstream import reference as ref
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig
from tests.support.clickstream_check import _frame, _same

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
SINKS = ("user_totals", "hourly_revenue", "sessions", "late_events", "quarantine")
#: The landing files of these runs: the first partition, and a small generator configuration with some of
#: every accident (duplicates, late and malformed events).
START = datetime(2026, 11, 1, tzinfo=timezone.utc)
SMALL = GeneratorConfig(users=6, events_per_hour=20, duplicate_rate=0.1, late_rate=0.1, malformed_rate=0.1, seed=11)


def write_config(path: Path, *, landing: str, warehouse: str, checkpoints: str, spark: dict, retain: int = 2) -> Path:
    config = {
        "landing": landing,
        "warehouse": warehouse,
        "checkpoints": {"dir": checkpoints, "retain": retain, "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": spark,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _env(env: dict[str, str] | None, crash_at: str | None) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k != "EPOCHAL_CRASH_AT"} | (env or {})
    if crash_at:
        full["EPOCHAL_CRASH_AT"] = crash_at
    return full


def epochal(config: Path, *args: str, env: dict[str, str] | None = None, crash_at: str | None = None
            ) -> subprocess.CompletedProcess:
    """Run ``epochal ARGS --config CONFIG --json``; ``env`` is added to this process's environment."""
    command = [EPOCHAL, *args, "--config", str(config), "--json"]
    return subprocess.run(command, env=_env(env, crash_at), capture_output=True, text=True, timeout=1800)


def start_epochal(config: Path, *args: str, logs: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``epochal`` in the background, its stdout and stderr going to ``logs``/stdout and stderr."""
    command = [EPOCHAL, *args, "--config", str(config), "--json"]
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        return subprocess.Popen(command, env=_env(env, None), stdout=out, stderr=err)


def ok(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def check_sinks(spark, landing: str, warehouse: Path, partitions: list[str]) -> dict[str, int]:
    """Assert every sink under the local folder ``warehouse`` equals the reference; return rows per sink."""
    expected = ref.expected_sinks(landing, partitions)
    rows = {}
    for name in SINKS:
        stored = set(spark.read.format("delta").load(str(warehouse / name)).columns)
        columns = [c for c in expected[name].columns if c in stored]  # late_events keeps no source_file
        exp = expected[name][columns].sort_values(columns).reset_index(drop=True)
        actual = _frame(spark, warehouse / name, columns)
        _same(actual, exp, name)
        rows[name] = len(actual)
    return rows
