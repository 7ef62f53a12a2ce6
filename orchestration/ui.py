"""``epochal ui``: the Dagster webserver and daemon on the project's definitions.

The instance lives in ``dagster.home`` (else ``$DAGSTER_HOME``, else ``.dagster``
next to the configuration file). Its ``dagster.yaml`` is written when missing:
the ``epochal`` pool and the ``epochal/deployment`` run tag are limited to one,
so only one epoch runs at a time, whoever launched it (UI, schedule, sensor,
backfill). The code location is ``epochal.orchestration.definitions`` with
``EPOCHAL_CONFIG`` set to the configuration file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from epochal.config import Settings, load_settings

INSTANCE_YAML = {
    "telemetry": {"enabled": False},
    "concurrency": {
        "pools": {"default_limit": 1},
        "runs": {"max_concurrent_runs": 4, "tag_concurrency_limits": [{"key": "epochal/deployment", "limit": 1}]},
    },
    "run_monitoring": {"enabled": True},
}


@dataclass
class UiProcesses:
    home: Path
    url: str
    webserver: subprocess.Popen
    daemon: subprocess.Popen

    def stop(self) -> None:
        """Stop both, with their code servers and run workers (each started its own process group)."""
        for proc in (self.webserver, self.daemon):
            _signal_group(proc, signal.SIGINT)
        for proc in (self.webserver, self.daemon):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def dagster_home(settings: Settings, config_path: str | None) -> Path:
    if settings.dagster.home is not None:
        return Path(settings.dagster.home)
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"])
    base = Path(config_path).resolve().parent if config_path else Path.cwd()
    return base / ".dagster"


def prepare_home(home: Path) -> Path:
    """Create the instance directory, its ``dagster.yaml`` (when missing) and a workspace file."""
    home.mkdir(parents=True, exist_ok=True)
    instance = home / "dagster.yaml"
    if not instance.exists():
        instance.write_text(yaml.safe_dump(INSTANCE_YAML, sort_keys=False))
    _create_storage(home)
    workspace = home / "workspace.yaml"
    workspace.write_text(yaml.safe_dump({
        "load_from": [{"python_module": {"module_name": "epochal.orchestration.definitions", "location_name": "epochal"}}]
    }))
    return workspace


def _create_storage(home: Path) -> None:
    """Create the instance's storage once, before the webserver, daemon and code server race to do it."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)


def start(config_path: str | None, *, port: int | None = None, log_dir: Path | None = None) -> UiProcesses:
    """Start the webserver and the daemon (each its own process group); return when both are launched."""
    path = str(Path(config_path).resolve()) if config_path else None
    settings = load_settings(path)
    home = dagster_home(settings, path)
    workspace = prepare_home(home)
    env = {**os.environ, "DAGSTER_HOME": str(home.resolve())}
    if path:
        env["EPOCHAL_CONFIG"] = path
    host, port = settings.dagster.webserver_host, port or settings.dagster.webserver_port
    bin_dir = Path(sys.executable).parent
    logs = log_dir or home
    webserver = subprocess.Popen(
        [str(bin_dir / "dagster-webserver"), "-h", host, "-p", str(port), "-w", str(workspace)],
        env=env, stdout=open(logs / "webserver.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    daemon = subprocess.Popen(
        [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
        env=env, stdout=open(logs / "daemon.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    return UiProcesses(home, f"http://{host}:{port}", webserver, daemon)


def serve(config_path: str | None) -> dict:
    """Run until interrupted (Ctrl-C), or until one of the two processes exits."""
    procs = start(config_path)
    print(f"epochal ui: Dagster at {procs.url} (instance {procs.home}); Ctrl-C stops it", file=sys.stderr, flush=True)
    try:
        while procs.webserver.poll() is None and procs.daemon.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        procs.stop()
    codes = {"webserver": procs.webserver.returncode, "daemon": procs.daemon.returncode}
    return {"url": procs.url, "home": str(procs.home), "exit_codes": codes}
