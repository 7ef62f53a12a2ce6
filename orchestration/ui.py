"""``epochal ui``: ``dagster dev`` (the Dagster webserver and daemon) on the project's definitions.

``dagster dev`` runs the webserver, the daemon and one code server for both.
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

STARTUP = Path(__file__).resolve().with_name("startup")
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
    dev: subprocess.Popen  # `dagster dev`: it starts and stops the webserver, the daemon and the code server

    def stop(self) -> None:
        """Stop ``dagster dev`` and everything it started (its own process group): SIGINT, then SIGKILL."""
        _signal_group(self.dev, signal.SIGINT)
        try:
            self.dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(self.dev, signal.SIGKILL)


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
    """Start ``dagster dev`` in its own process group on the instance and definitions; return once launched."""
    path = str(Path(config_path).resolve()) if config_path else None
    settings = load_settings(path)
    home = dagster_home(settings, path)
    workspace = prepare_home(home)
    env = {**os.environ, "DAGSTER_HOME": str(home.resolve()), "PYTHONPATH": _startup_path()}
    if path:
        env["EPOCHAL_CONFIG"] = path
    host, port = settings.dagster.webserver_host, port or settings.dagster.webserver_port
    dagster = Path(sys.executable).parent / "dagster"
    logs = log_dir or home
    dev = subprocess.Popen(
        [str(dagster), "dev", "-w", str(workspace), "-h", host, "-p", str(port)],
        env=env, stdout=open(logs / "dagster-dev.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # the caller's working directory, as before: relative paths in the configuration mean the same in runs
    return UiProcesses(home, f"http://{host}:{port}", dev)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _startup_path() -> str:
    """PYTHONPATH with ``startup/`` first: its ``sitecustomize`` fixes Dagster 1.13 in the webserver
    (:mod:`epochal.orchestration.dagster_compat`)."""
    return os.pathsep.join(p for p in (str(STARTUP), os.environ.get("PYTHONPATH")) if p)


def serve(config_path: str | None) -> dict:
    """Run until interrupted (Ctrl-C, SIGINT or SIGTERM), or until ``dagster dev`` exits."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background (SIGINT ignored)
    signal.signal(signal.SIGTERM, _interrupt)
    procs = start(config_path)
    print(f"epochal ui: dagster dev at {procs.url} (instance {procs.home}, log {procs.home / 'dagster-dev.log'}); "
          "Ctrl-C stops it", file=sys.stderr, flush=True)
    try:
        while procs.dev.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        procs.stop()
    return {"url": procs.url, "home": str(procs.home), "exit_code": procs.dev.returncode}
