"""A Spark standalone cluster on loopback for tests: one master, N small workers.

Started with pyspark's own launcher (``$SPARK_HOME/bin/spark-class``; the pip
package ships no ``sbin/start-master.sh``), every daemon bound to 127.0.0.1,
logs and work folders under one temporary folder, every process in its own
process group so that :meth:`StandaloneCluster.stop` ends exactly what it
started. A worker can be killed with SIGKILL together with the executor JVM
(and Python workers) it launched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = os.path.dirname(pyspark.__file__)
SPARK_CLASS = os.path.join(SPARK_HOME, "bin", "spark-class")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first seen by walking /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen
    log: Path
    webui_port: int
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


@dataclass
class StandaloneCluster:
    root: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    webui_port: int = field(default_factory=free_port)
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def worker_daemons(self) -> list[Daemon]:
        return [d for d in self.daemons if d.name.startswith("worker")]

    def start(self, timeout_s: float = 180) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self._launch("master", self.webui_port, MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                     "--webui-port", str(self.webui_port))
        self.wait_for(lambda s: s.get("status") == "ALIVE", "the master to be ALIVE", timeout_s)
        for i in range(self.workers):
            work = self.root / f"worker-{i}" / "work"
            work.mkdir(parents=True, exist_ok=True)
            webui = free_port()
            self._launch(f"worker-{i}", webui, WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(self.worker_cores),
                         "--memory", self.worker_memory, "--work-dir", str(work), "--webui-port", str(webui),
                         self.master_url)
        self.wait_for(lambda s: s.get("aliveworkers") == self.workers, f"{self.workers} ALIVE workers", timeout_s)
        return self

    def state(self) -> dict:
        """The master's JSON status page (workers, applications)."""
        return _get_json(f"http://127.0.0.1:{self.webui_port}/json/")

    def worker_of_executor(self, app_id: str, executor_id: str) -> int:
        """The index of the worker that runs executor ``executor_id`` of application ``app_id``."""
        for index, daemon in enumerate(self.worker_daemons):
            if daemon.killed:
                continue
            executors = _get_json(f"http://127.0.0.1:{daemon.webui_port}/json/").get("executors", [])
            if any(e.get("appid") == app_id and str(e.get("id")) == str(executor_id) for e in executors):
                return index
        raise LookupError(f"no live worker runs executor {executor_id} of {app_id}")

    def wait_for(self, predicate, what: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            dead = [d.name for d in self.daemons if d.process.poll() is not None and not d.killed]
            if dead:
                raise RuntimeError(f"{dead} exited; see logs under {self.root}")
            try:
                state = self.state()
                if predicate(state):
                    return state
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:.0f}s for {what}; see logs under {self.root}")
            time.sleep(0.5)

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker ``index`` and everything it launched (executor JVM, Python workers); return the pids."""
        daemon = self.worker_daemons[index]
        pids = [daemon.pid, *descendants(daemon.pid)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        daemon.killed = True
        daemon.process.wait(timeout=30)
        return pids

    def worker_work_dir(self, index: int) -> Path:
        return self.root / f"worker-{index}" / "work"

    def stop(self) -> None:
        """End every process this cluster started (workers first), by process group."""
        for daemon in reversed(self.daemons):
            if daemon.process.poll() is None:
                _signal_group(daemon.pid, signal.SIGTERM)
        for daemon in reversed(self.daemons):
            try:
                daemon.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(daemon.pid, signal.SIGKILL)
                daemon.process.wait(timeout=30)
            # executors outlive a SIGTERMed worker only briefly; make sure none is left
            _signal_group(daemon.pid, signal.SIGKILL)

    def _launch(self, name: str, webui_port: int, main_class: str, *args: str) -> Daemon:
        log = self.root / f"{name}.log"
        env = {
            **os.environ,
            "SPARK_HOME": SPARK_HOME,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.root / name / "local"),
            "SPARK_LOG_DIR": str(self.root / "logs"),
            "SPARK_PID_DIR": str(self.root / "pids"),
            # a lost worker is noticed at once (its connection drops); a silent one within 15 s
            "SPARK_MASTER_OPTS": "-Dspark.worker.timeout=15",
            "SPARK_DAEMON_MEMORY": "512m",
        }
        with open(log, "wb") as out:
            process = subprocess.Popen([SPARK_CLASS, main_class, *args], stdout=out, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True)
        daemon = Daemon(name, process, log, webui_port)
        self.daemons.append(daemon)
        return daemon


def _get_json(url: str, attempts: int = 5):
    """A daemon's JSON page. Asked again on a dropped connection: a worker's web UI on a loaded 2-core machine
    closed one without a response (fresh clone, 2026-12-06 22:5x, mid-epoch of the cluster test)."""
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except (ConnectionError, urllib.error.URLError):
            if attempt == attempts:
                raise
            time.sleep(0.5 * attempt)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
