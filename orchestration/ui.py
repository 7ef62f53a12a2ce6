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

import errno
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from epochal.config import Settings, load_settings
from epochal.errors import EpochalError
from epochal.pipeline.registry import build_pipeline

STARTUP = Path(__file__).resolve().with_name("startup")
CONFIG_ENV = "EPOCHAL_CONFIG"
#: What a deployment without a configuration file gets, said where the definitions load and by ``epochal ui``.
NO_CONFIG = (f"{CONFIG_ENV} is not set: epochal's defaults are used (the clickstream example, paths under ./data); "
             f"set {CONFIG_ENV} to your epochal.yaml")
DEQUEUE_INTERVAL_S = 1
INSTANCE_YAML = {
    "telemetry": {"enabled": False},
    "concurrency": {
        "pools": {"default_limit": 1},
        "runs": {"max_concurrent_runs": 4, "tag_concurrency_limits": [{"key": "epochal/deployment", "limit": 1}]},
    },
    "run_monitoring": {"enabled": True},
    # Dagster's queue daemon looks for queued runs every 5 s by default: every run launched from the UI, a
    # schedule or a backfill waited 2.5 s on average before its process started. One second; a query of
    # the queued runs a second costs the daemon nothing measurable.
    "run_queue": {"dequeue_interval_seconds": DEQUEUE_INTERVAL_S},
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


def start(config_path: str | None, *, port: int | None = None, log_dir: Path | None = None,
          settings: Settings | None = None) -> UiProcesses:
    """Start ``dagster dev`` in its own process group on the instance and definitions; return once launched
    (``settings``: the configuration's, when the caller has loaded them)."""
    path = str(Path(config_path).resolve()) if config_path else None
    settings = settings if settings is not None else load_settings(path)
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


class UiError(EpochalError):
    """``epochal ui`` could not start, or ``dagster dev`` stopped by itself."""


def serve(config_path: str | None) -> dict:
    """Run until interrupted (Ctrl-C, SIGINT or SIGTERM). The pipeline is built first (a bad import path is an
    error here, not only in the UI's code location); ``dagster dev`` stopping by itself is an error naming the
    last error line of its log (it exits 0 when its webserver died)."""
    path = str(Path(config_path).resolve()) if config_path else None
    settings = load_settings(path)
    build_pipeline(settings)
    check_address(settings.dagster.webserver_host, settings.dagster.webserver_port)
    if not path:
        print(f"epochal ui: no --config, and {NO_CONFIG}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background (SIGINT ignored)
    signal.signal(signal.SIGTERM, _interrupt)
    log = dagster_home(settings, path) / "dagster-dev.log"
    offset = log.stat().st_size if log.exists() else 0
    procs = start(path, settings=settings)
    print(f"epochal ui: dagster dev at {procs.url} (instance {procs.home}, log {log}); Ctrl-C stops it",
          file=sys.stderr, flush=True)
    interrupted = False
    try:
        while procs.dev.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        procs.stop()
    if not interrupted:
        raise UiError(f"dagster dev stopped by itself (exit code {procs.dev.returncode}): {_last_error(log, offset)}",
                      action=f"read {log}", log=str(log))
    return {"url": procs.url, "home": str(procs.home), "exit_code": procs.dev.returncode}


def check_address(host: str, port: int) -> None:
    """Fail now if the webserver could not listen on ``host:port`` (taken by another server, or an address that
    is not this machine's): ``dagster dev`` would keep restarting its webserver instead of stopping."""
    import socket

    where = "set dagster.webserver_port (or EPOCHAL__DAGSTER__WEBSERVER_PORT), or stop what listens there"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UiError(f"dagster.webserver_host {host!r} does not resolve: {exc.strerror}.",
                      action="set dagster.webserver_host to an address of this machine") from exc
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the webserver binds: a closed one's TIME_WAIT is fine
        try:
            probe.bind(address)
        except OSError as exc:
            action = where if exc.errno == errno.EADDRINUSE else "set dagster.webserver_host to an address of this machine"
            raise UiError(f"the Dagster webserver cannot listen on {host}:{port}: {exc.strerror}.", action=action) from exc


_RAISED = re.compile(r"^[\w.]*(Error|Exception): ")


def _last_error(log: Path, offset: int) -> str:
    """The first and the last exception ``log`` shows after ``offset`` (the cause, and how dagster dev ended)."""
    try:
        with log.open("rb") as fh:
            fh.seek(offset)
            lines = [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines()]
    except OSError:
        return "no log"
    raised = [line for line in lines if _RAISED.match(line)]
    if not raised:
        return lines[-1] if lines else "nothing in its log"
    return raised[0] if len(raised) == 1 or raised[0] == raised[-1] else f"{raised[0]}; then {raised[-1]}"
