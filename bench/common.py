"""What every benchmark part shares: Spark settings, memory probes, child processes, result files.

Every measurement that matters runs in a child process started by
:func:`run_child` (a fresh JVM, as a scheduled run would have), which prints
one JSON document on its last stdout line. Children inherit the parent's
niceness: ``make bench`` starts everything under ``nice -n 15``.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from epochal.config import SparkSettings

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS = BENCH_DIR / "results"
#: Where data, state and warehouses go (large at full size: several GB).
WORK = Path(os.environ.get("EPOCHAL_BENCH_WORK", "/tmp/epochal-bench"))

#: The same Spark for both sides: local, 2 cores, 2 shuffle partitions, the same driver heap.
MASTER = os.environ.get("EPOCHAL_BENCH_MASTER", "local[2]")
DRIVER_MEMORY = os.environ.get("EPOCHAL_BENCH_DRIVER_MEMORY", "2g")


def spark_settings(*, event_log: str | None = None, **conf: str) -> SparkSettings:
    """The Spark settings both sides run with (``event_log``: a folder for Spark's event log).

    ``EPOCHAL_BENCH_EVENT_LOG`` turns the event log on for every process (for ``bench.profile``);
    ``EPOCHAL_BENCH_JIT`` sets ``spark.jit`` on both sides (``tiered``, ``quick``; default ``auto``), and
    ``EPOCHAL_BENCH_GC`` ``spark.gc`` (``jvm``; default ``parallel``).
    """
    extra = dict(conf)
    event_log = event_log or os.environ.get("EPOCHAL_BENCH_EVENT_LOG")
    if event_log:
        Path(event_log).mkdir(parents=True, exist_ok=True)
        # One plain JSON-lines file per application (Spark 4 writes rolling, zstd-compressed folders by default,
        # which bench.profile reads too, through the zstd command).
        extra |= {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{event_log}",
                  "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}
    return SparkSettings(
        master=MASTER, parallelism=2, max_parallelism=128, shuffle_partitions=2, driver_memory=DRIVER_MEMORY,
        jit=os.environ.get("EPOCHAL_BENCH_JIT", "auto"), gc=os.environ.get("EPOCHAL_BENCH_GC", "parallel"), conf=extra,
    )


def deployment_config(
    path: Path, *, pipeline: str, landing: str, work: Path, event_log: str | None = None, **checkpoints: Any
) -> Path:
    """Write the YAML file of one benchmark deployment under ``work`` (checkpoint settings as keywords)."""
    import yaml

    config = {
        "pipeline": pipeline,
        "landing": landing,
        "warehouse": str(work / "warehouse"),
        "checkpoints": {"dir": str(work / "checkpoints"), "retain": 3, "interval_epochs": 1, **checkpoints},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": spark_settings(event_log=event_log).model_dump(mode="json"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


# ----------------------------------------------------------------------------- memory


def _proc_status(pid: int) -> dict[str, int]:
    """``VmHWM`` (peak RSS) and ``VmRSS`` of a process, in bytes, from /proc."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    found[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return found


def jvm_pid(spark) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


def jvm_heap_peak(spark) -> int:
    """Sum of the peak usage of the JVM's heap pools since start (or the last :func:`reset_jvm_peaks`)."""
    jvm = spark._jvm
    total = 0
    for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if str(pool.getType().name()) == "HEAP":
            total += int(pool.getPeakUsage().getUsed())
    return total


def reset_jvm_peaks(spark) -> None:
    for pool in spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        pool.resetPeakUsage()


def memory_report(spark) -> dict[str, int]:
    """Peak driver memory so far: Python RSS (this process), JVM RSS (the driver JVM) and JVM heap."""
    jvm = _proc_status(jvm_pid(spark))
    return {
        "python_peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak_rss": jvm.get("VmHWM", 0),
        "jvm_heap_peak": jvm_heap_peak(spark),
    }


# ----------------------------------------------------------------------------- child processes


class ChildFailed(RuntimeError):
    """A benchmark child process exited non-zero."""


def run_child(module: str, args: Sequence[str], *, timeout_s: float = 7200) -> dict[str, Any]:
    """Run ``python -m <module> <args>`` in a fresh process; its last stdout line is a JSON document.

    Adds ``wall_s`` (the whole process: interpreter, JVM start, work, exit).
    """
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=timeout_s,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-25:])
        raise ChildFailed(f"python -m {module} {' '.join(map(str, args))} exited {done.returncode}:\n{tail}")
    lines = [line for line in done.stdout.strip().splitlines() if line.strip()]
    if not lines:
        raise ChildFailed(f"python -m {module} printed nothing on stdout")
    result = json.loads(lines[-1])
    result["wall_s"] = round(wall, 3)
    return result


def emit(result: dict[str, Any]) -> None:
    """Print the one JSON document a child reports (the last stdout line)."""
    sys.stdout.write(json.dumps(result, default=str) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- timing and results


@dataclass
class Stopwatch:
    started: float = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.monotonic()
        self.elapsed = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = round(time.monotonic() - self.started, 3)


def stamp() -> dict[str, object]:
    """When a part starts, and the machine's load average then (the machine may be shared)."""
    return {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "load": [round(x, 2) for x in os.getloadavg()]}


def median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or not b:
        return None
    return round(a / b, 3)


def dir_bytes(path: str | Path) -> int:
    """Bytes of every file under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def load_results(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def save_results(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(path)
