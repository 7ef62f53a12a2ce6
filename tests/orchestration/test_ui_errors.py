"""``epochal ui`` fails with one line that says why when the pipeline cannot be imported, before Dagster starts
(the error was only in the UI's code location). ``dagster dev`` stopping by itself (it exits 0 when its webserver
dies on an import) is an error too; no test makes its webserver die: one whose port is taken, or whose host
is not this machine's, keeps trying (seen 2026-11-30)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

EPOCHAL = str(Path(sys.executable).with_name("epochal"))


def _config(tmp_path: Path, port: int, pipeline: str = "clickstream") -> Path:
    path = tmp_path / "epochal.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": pipeline, "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints")},
        "dagster": {"home": str(tmp_path / "dagster"), "webserver_port": port, "schedule_enabled": False},
    }))
    return path


def _ui(config: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "EPOCHAL_CONFIG")}
    return subprocess.run([EPOCHAL, "ui", "--config", str(config)], capture_output=True, text=True, timeout=300, env=env)


def test_a_pipeline_that_cannot_be_imported_fails_before_dagster_starts(tmp_path):
    result = _ui(_config(tmp_path, 3999, pipeline="acme_missing.pipeline:build"))
    assert result.returncode == 1
    assert "epochal: error: pipeline 'acme_missing.pipeline:build' (config key 'pipeline'): no module named" in result.stderr
    assert not (tmp_path / "dagster").exists(), "no Dagster instance was made"
