"""A user's own pipeline, written the obvious way from the README, in a package outside the
repository: three epochs ``a:1, b:2 | a:10 | a:100, b:5`` leave the state and the upsert sink
right (a=111, b=7), with no ``localCheckpoint`` line: state reads are pinned at the call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from epochal.config import load_settings
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from tests.support.user_package import EPOCHS, ROWS_MODULE, TOTALS_MODULE, on_import_path, write_landing

LAST = "2026-11-01-02:00"


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project: their package (on PYTHONPATH), landing data, a configuration naming the package."""
    with on_import_path(tmp_path / "site", "acme", {"rows": ROWS_MODULE, "totals": TOTALS_MODULE}, monkeypatch):
        yield _write_project(tmp_path)


def _write_project(tmp_path: Path) -> Path:
    write_landing(tmp_path, EPOCHS)
    config = {
        "pipeline": "acme.totals:build",
        "landing": "landing",
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
        "checkpoints": {"interval_epochs": 1, "retain": 2},
    }
    (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


def _sink(spark, project: Path) -> dict[str, int]:
    return {r.key: r.total for r in spark.read.format("delta").load(str(project / "data" / "warehouse" / "totals")).collect()}


@pytest.mark.parametrize("rewrite_below_mb, operation", [(None, "WRITE"), (0, "MERGE")])
def test_three_epochs_leave_the_state_and_the_sink_right_without_any_workaround(spark, project, rewrite_below_mb, operation):
    """Small state tables are rewritten by default (one overwrite a write); ``spark.state_rewrite_below_mb: 0``
    MERGEs them: the same state and sink either way."""
    from delta.tables import DeltaTable

    settings = load_settings(project / "epochal.yaml")
    if rewrite_below_mb is not None:
        settings = settings.model_copy(update={"spark": settings.spark.model_copy(update={"state_rewrite_below_mb": rewrite_below_mb})})
    runner = EpochRunner(build_deployment(settings, spark))
    runner.run(to=LAST)
    assert _sink(spark, project) == {"a": 111, "b": 7}
    stage = runner.d.pipeline.ordered_stages[-1]
    backend = runner.d.keyed[stage.name]
    state = backend.values(stage.TOTAL).collect()
    assert {r.key: r.value for r in state} == {"a": 111, "b": 7}
    history = DeltaTable.forPath(spark, backend.table_path(stage.TOTAL)).history().collect()
    # versions 2 and 3 (Delta records a MERGE into the empty table of version 1 as a WRITE)
    assert [r.operation for r in history if r.version > 1] == [operation] * 2, [(r.version, r.operation) for r in history]


def test_a_frame_read_before_a_write_keeps_the_old_state(spark, tmp_path):
    from pyspark.sql import types as T

    from epochal import ValueStateDescriptor
    from epochal.state.backends.keyed import KeyedStateBackend

    total = ValueStateDescriptor("total", value_type=T.LongType())
    backend = KeyedStateBackend(spark, str(tmp_path), "stage", max_parallelism=16)
    backend.update(total, spark.createDataFrame([("a", 1)], "key string, value long"))
    before = backend.values(total)  # lazy: evaluated below, after the write
    backend.update(total, spark.createDataFrame([("a", 5)], "key string, value long"))
    assert [r.value for r in before.collect()] == [1]
    assert [r.value for r in backend.values(total).collect()] == [5]


@pytest.mark.slow
def test_the_cli_runs_a_pipeline_named_by_its_import_path(spark, project):
    """``epochal run`` in its own process loads ``acme.totals:build`` from the user's PYTHONPATH."""
    epochal = str(Path(sys.executable).with_name("epochal"))
    result = subprocess.run(
        [epochal, "run", "--to", LAST, "--config", str(project / "epochal.yaml"), "--json"],
        capture_output=True, text=True, timeout=900, cwd=project,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert [e["checkpoint_status"] for e in report["epochs"]] == ["completed"] * 3
    assert report["jit"] == "quick"  # three epochs of a few bytes: C2 would not pay off (spark.jit: auto)
    assert _sink(spark, project) == {"a": 111, "b": 7}


def _history(spark, project: Path) -> list[str]:
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, str(project / "data" / "warehouse" / "totals"))
    return [r.operation for r in table.history().orderBy("version").select("operation").collect()]


def test_restore_brings_the_upsert_sink_of_a_stage_without_view_back_to_the_checkpoint(spark, project):
    """The stage has no ``view()``: the sink comes back by the Delta version its checkpoint recorded."""
    runner = EpochRunner(build_deployment(load_settings(project / "epochal.yaml"), spark))
    runner.run(to=LAST)
    checkpoints = sorted(runner.d.coordinator.store.all(), key=lambda c: int(c.metadata.epoch))
    assert [int(c.metadata.epoch) for c in checkpoints] == [1, 2]
    assert all(c.metadata.sink("totals") is not None for c in checkpoints)

    runner.restore()  # the latest: nothing changes
    assert _sink(spark, project) == {"a": 111, "b": 7}

    before = len(_history(spark, project))
    runner.restore(int(checkpoints[0].checkpoint_id))  # epoch 1
    assert _sink(spark, project) == {"a": 11, "b": 2}
    assert _history(spark, project)[before:] == ["RESTORE"]  # one commit a reader sees whole

    runner.run(to=LAST)
    assert _sink(spark, project) == {"a": 111, "b": 7}


@pytest.mark.slow
def test_after_a_kill_between_the_sink_write_and_the_checkpoint_the_sink_is_rewound_and_replayed(spark, project):
    """SIGKILL after epoch 2 wrote the sink, before its checkpoint completed: the restart restores
    checkpoint 1 (state and sink, by version) and replays epoch 2 to the same output."""
    epochal = str(Path(sys.executable).with_name("epochal"))
    env = {**__import__("os").environ, "EPOCHAL_CRASH_AT": "after_last_ack:2"}
    killed = subprocess.run([epochal, "run", "--to", LAST, "--config", str(project / "epochal.yaml")],
                            capture_output=True, text=True, timeout=900, cwd=project, env=env)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert _sink(spark, project) == {"a": 111, "b": 7}  # written, not yet checkpointed
    # `epochal state read` (no JVM: delta-rs) says the working table may hold epoch 2's uncheckpointed writes
    no_jvm = {**env, "EPOCHAL_CRASH_AT": "", "JAVA_HOME": "/nonexistent-java"}
    read = subprocess.run([epochal, "state", "read", "sum", "total", "--json", "--config", str(project / "epochal.yaml")],
                          capture_output=True, text=True, timeout=300, cwd=project, env=no_jvm)
    assert read.returncode == 0, read.stderr[-3000:]
    document = json.loads(read.stdout)
    assert {r["key"]: r["value"] for r in document["rows"]} == {"a": 111, "b": 7}, "epoch 2's writes are there"
    assert (document["read"]["checkpoint"], document["read"]["epoch"]) == (None, 1)
    assert document["read"]["unfinished"].startswith("the last run did not finish epoch 2: "), document["read"]
    at = subprocess.run([epochal, "state", "read", "sum", "total", "--checkpoint", "2", "--config",
                         str(project / "epochal.yaml")], capture_output=True, text=True, timeout=300, cwd=project, env=no_jvm)
    assert at.returncode == 0 and at.stdout.startswith("sum/total: 2 rows (checkpoint 2, epoch 1, table version "), at

    runner = EpochRunner(build_deployment(load_settings(project / "epochal.yaml"), spark))
    report = runner.run(to=LAST)
    assert report.restored.epoch == 1
    assert [e.epoch for e in report.epochs] == [2]
    assert _sink(spark, project) == {"a": 111, "b": 7}
    assert "RESTORE" in _history(spark, project)
