"""The clickstream example on a Spark standalone cluster on loopback: a master and two workers.

The run is the real ``epochal run`` process with ``spark.master: spark://127.0.0.1:<port>``;
its executors live in the workers' JVMs and get the Delta jars from the driver
(``spark.jars.packages`` resolves them on the driver, which ships them). In the
middle of epoch 1 one worker is killed with SIGKILL together with its executor:
the sinks must still equal the pure-Python reference, as in local mode.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from epochal.pipeline.examples.clickstream.generator import generate
from tests.support.clickstream_e2e import SMALL, START, check_sinks, epochal, ok, start_epochal, write_config
from tests.support.reliability_doc import markdown_table, write_section
from tests.support.spark_cluster import free_port

PARTITIONS = ["2026-11-01-00:00", "2026-11-01-01:00"]
KILL_EPOCH = 1


def _in_progress(checkpoints: Path) -> int | None:
    try:
        return json.loads((checkpoints / "progress.json").read_text()).get("in_progress")
    except (OSError, ValueError):
        return None


def _state_commits(checkpoints: Path) -> set[Path]:
    return set((checkpoints / "shared").glob("*/*/_delta_log/*.json"))


def _wait_mid_epoch(checkpoints: Path, epoch: int, run, timeout_s: float = 1200) -> None:
    """Return once ``epoch`` is in progress and has written state (a new Delta commit under shared/)."""
    deadline = time.monotonic() + timeout_s
    before: set[Path] | None = None
    while True:
        assert run.poll() is None, f"epochal exited ({run.returncode}) before epoch {epoch} was under way"
        if before is None and _in_progress(checkpoints) == epoch:
            before = _state_commits(checkpoints)
        elif before is not None and _state_commits(checkpoints) - before:
            return
        assert time.monotonic() < deadline, f"epoch {epoch} did not write state within {timeout_s:.0f}s"
        time.sleep(0.2)


def _busy_executor(ui_port: int) -> tuple[str, str] | None:
    """(application id, executor id) of an executor running a task now, from the driver's REST API."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=5) as response:
            app = json.loads(response.read())[0]["id"]
        with urllib.request.urlopen(f"{base}/{app}/executors", timeout=5) as response:
            executors = json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, IndexError):
        return None
    busy = [e["id"] for e in executors if e["id"] != "driver" and e.get("activeTasks", 0) > 0]
    return (app, busy[0]) if busy else None


def _wait_busy_executor(checkpoints: Path, epoch: int, ui_port: int, run, timeout_s: float = 600) -> tuple[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        assert run.poll() is None and _in_progress(checkpoints) == epoch, f"no executor seen busy in epoch {epoch}"
        found = _busy_executor(ui_port)
        if found:
            return found
        assert time.monotonic() < deadline, f"no executor busy within {timeout_s:.0f}s"
        time.sleep(0.05)


# Spark 3.5's driver log lines (INFO and up) for what a lost executor costs.
EXECUTOR_LOST = r"Lost executor (\d+)"
RUNNING_TASK_LOST = (
    r"failed because while it was being computed, its executor exited"  # INFO, the executor died under it
    r"|WARN TaskSetManager: Lost task (?![^\n]*FetchFailed)"
)
FETCH_FAILED = r"WARN TaskSetManager: Lost task [^\n]*FetchFailed\("
STAGES_RESUBMITTED = r"Resubmitting ([^\n]*) due to fetch failure"
MAP_OUTPUT_RESUBMITTED = r"Resubmitted \S+, so marking it as still running"


def _retries(stderr: str) -> dict[str, int]:
    """What the driver's log (at INFO) says it lost and redid."""
    resubmitted = re.findall(STAGES_RESUBMITTED, stderr)
    return {
        "executors lost": len(set(re.findall(EXECUTOR_LOST, stderr))),
        "running tasks lost, rerun on the other executor": len(re.findall(RUNNING_TASK_LOST, stderr)),
        "tasks failed fetching lost shuffle output": len(re.findall(FETCH_FAILED, stderr)),
        "stages resubmitted to recompute lost output": sum(len(re.findall(r"Stage \d+", r)) for r in resubmitted),
        "finished map tasks resubmitted": len(re.findall(MAP_OUTPUT_RESUBMITTED, stderr)),
    }


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_cluster_run_with_a_worker_killed_mid_epoch_equals_reference(spark, spark_cluster, tmp_path):
    landing, warehouse, checkpoints = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "checkpoints"
    ui_port = free_port()
    generate(str(landing), START, len(PARTITIONS), SMALL)
    config = write_config(
        tmp_path / "epochal.yaml", landing=str(landing), warehouse=str(warehouse), checkpoints=str(checkpoints),
        spark={"master": spark_cluster.master_url, "parallelism": 2, "shuffle_partitions": 2, "driver_memory": "1g",
               "ui_enabled": True,  # its REST API tells which executor is running a task
               "conf": {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.ui.port": str(ui_port)}},
    )
    started = time.monotonic()
    run = start_epochal(config, "run", "--to", PARTITIONS[-1], logs=tmp_path / "run",
                        env={"EPOCHAL_SPARK_LOG_LEVEL": "INFO"})
    try:
        _wait_mid_epoch(checkpoints, KILL_EPOCH, run)
        holding = [w for w in spark_cluster.state()["workers"] if w["coresused"] == 1]
        assert len(holding) == 2, f"the application should hold an executor on each worker: {holding}"
        app_id, executor_id = _wait_busy_executor(checkpoints, KILL_EPOCH, ui_port, run)
        victim = spark_cluster.worker_of_executor(app_id, executor_id)
        killed = spark_cluster.kill_worker(victim)
        run.wait(timeout=1800)
    finally:
        if run.poll() is None:
            run.kill()
    stderr = (tmp_path / "run" / "stderr").read_text()
    retries = _retries(stderr)
    assert retries["executors lost"] >= 1, "the driver never noticed the killed executor"

    if run.returncode == 0:
        outcome = "the run went on, on the surviving worker (no rerun of epochal needed)"
        report = json.loads((tmp_path / "run" / "stdout").read_text())
    else:  # the epoch failed: a rerun restores the last checkpoint and replays
        outcome = f"the run failed (exit {run.returncode}); the rerun restored and replayed"
        report = ok(epochal(config, "run", "--to", PARTITIONS[-1]))
        assert report["restored"] is not None
    assert [e["checkpoint_status"] for e in report["epochs"]][-1] == "completed"
    rows = check_sinks(spark, str(landing), warehouse, PARTITIONS)

    # executors ran Delta writes, with the Delta jars the driver shipped them
    survivor = spark_cluster.worker_work_dir(1 - victim)
    shipped = sorted(p.name for p in survivor.glob("app-*/*/io.delta_delta-spark_*.jar"))
    assert shipped, "the surviving worker's executor never fetched the Delta jar"

    body = "\n\n".join([
        f"A Spark standalone cluster on 127.0.0.1 (pyspark's `spark-class` Master and Worker): "
        f"{spark_cluster.workers} workers of {spark_cluster.worker_cores} core and {spark_cluster.worker_memory}. "
        f"`epochal run` over {len(PARTITIONS)} hourly partitions; in the middle of epoch {KILL_EPOCH} (after its first "
        f"state write), while its executor was running a task, a worker and everything it launched (executor JVM, "
        f"Python workers: {len(killed)} processes) were killed with SIGKILL.",
        markdown_table(["figure", "value"], [
            ["sinks equal to the reference (as in local mode)", f"{len(rows)} of 5 ({sum(rows.values())} rows)"],
            ["workers killed mid-epoch", 1],
            *[[name, count] for name, count in retries.items()],
            ["outcome", outcome],
            ["Delta jars fetched by the surviving executor", ", ".join(shipped)],
            ["wall time (s)", f"{time.monotonic() - started:.0f}"],
        ]),
    ])
    write_section("distributed-cluster", "Beyond one machine: a standalone cluster", body,
                  test=__file__)


def test_a_driver_for_a_loopback_master_binds_to_loopback():
    from epochal.config import SparkSettings
    from epochal.state.session import spark_conf

    assert spark_conf(SparkSettings(master="spark://127.0.0.1:7077"))["spark.driver.host"] == "127.0.0.1"
    assert spark_conf(SparkSettings(master="spark://localhost:7077"))["spark.driver.bindAddress"] == "127.0.0.1"
    assert "spark.driver.host" not in spark_conf(SparkSettings(master="spark://10.1.2.3:7077"))
