"""``epochal ui`` fails with one line that says why when the pipeline cannot be imported, before Dagster starts
(the error was only in the UI's code location). ``dagster dev`` stopping by itself (it exits 0 when its webserver
dies on an import) is an error too. A port that is taken, or a host that is not this machine's, fails before
Dagster starts too: dagster dev would keep restarting its webserver there (seen 2026-11-30)."""

from __future__ import annotations

import os
import socket
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
    config = _config(tmp_path, 3999, pipeline="acme_missing.pipeline:build")
    result = _ui(config)
    assert result.returncode == 1
    assert (f"epochal: error: pipeline 'acme_missing.pipeline:build' (config key 'pipeline' in {config}): "
            "no module named") in result.stderr
    assert not (tmp_path / "dagster").exists(), "no Dagster instance was made"


def test_a_port_already_taken_or_a_host_not_of_this_machine_fails_before_dagster_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _ui(_config(tmp_path, port))
    assert result.returncode == 1
    assert (f"epochal: error: the Dagster webserver cannot listen on 127.0.0.1:{port}: Address already in use. "
            "Operator action: set dagster.webserver_port") in result.stderr
    assert not (tmp_path / "dagster").exists(), "no Dagster instance was made"

    config = _config(tmp_path, 3999)
    settings = yaml.safe_load(config.read_text())
    settings["dagster"]["webserver_host"] = "192.0.2.1"  # TEST-NET-1: never an address of this machine
    config.write_text(yaml.safe_dump(settings))
    result = _ui(config)
    assert result.returncode == 1
    assert "cannot listen on 192.0.2.1:3999: Cannot assign requested address. Operator action: set dagster.webserver_host" in result.stderr
