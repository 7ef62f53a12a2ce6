"""The epoch runner on a tiny pipeline: checkpoints, restore, backfill, crashes at named points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from epochal.config import load_settings
from epochal.pipeline.errors import PipelineError, StageError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner

import tests.support.toy_pipeline as toy
from tests.support.paths import child_env

HOURS = [
    [("a", 1), ("b", 2)],
    [("a", 10), ("c", 3)],
    [("b", 5)],
    [("a", 100), ("d", 7)],
]
EXPECTED_TOTALS = {"a": 111, "b": 7, "c": 3, "d": 7}


def _deploy(tmp: Path, **checkpoints) -> Path:
    landing = tmp / "landing"
    for hour, rows in enumerate(HOURS):
        toy.write_hour(landing, hour, rows)
    config = {
        "pipeline": "toy",
        "landing": str(landing),
        "warehouse": str(tmp / "warehouse"),
        "checkpoints": {"dir": str(tmp / "checkpoints"), "retain": 2, **checkpoints},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _runner(spark, config: Path) -> EpochRunner:
    return EpochRunner(build_deployment(load_settings(config), spark))


def _sinks(runner) -> tuple[dict, list]:
    totals = {r.key: r.total for r in runner.d.sinks["totals"].read().collect()}
    log = sorted((r.epoch, r.key, r.n) for r in runner.d.sinks["log"].read().collect())
    return totals, log


EXPECTED_LOG = sorted((e, k, n) for e, rows in enumerate(HOURS) for k, n in rows)


def test_run_checkpoints_restore_and_backfill(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path))
    report = runner.run(to="2026-11-01-01:00")
    savepoint = runner.savepoint("after-hour-1")
    assert savepoint["epoch"] == 1
    report.epochs += runner.run(to="2026-11-01-03:00").epochs
    assert [e.epoch for e in report.epochs] == [0, 1, 2, 3]
    assert all(e.checkpoint_status == "completed" for e in report.epochs)
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    # rows each epoch wrote, from the sinks' Delta commits: every row appended, every key whose total changed
    assert [e.sink_rows for e in report.epochs] == [{"totals": len(dict(rows)), "log": len(rows)} for rows in HOURS]
    retained = runner.d.coordinator.store.all()
    assert sorted(int(c.metadata.epoch) for c in retained if c.metadata.kind.value == "checkpoint")[-2:] == [2, 3]

    # restore the checkpoint of epoch 2: state and sinks rewind to the end of epoch 2 ...
    cp2 = [c for c in retained if int(c.metadata.epoch) == 2 and c.metadata.kind.value == "checkpoint"][0]
    restored = runner.restore(int(cp2.checkpoint_id))
    assert restored.epoch == 2
    totals, log = _sinks(runner)
    assert totals == {"a": 11, "b": 7, "c": 3} and max(e for e, _, _ in log) == 2
    # ... and running on gives the straight run's sinks
    runner.run(to="2026-11-01-03:00")
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)

    # the same from the savepoint taken after hour 1
    restored = runner.restore(savepoint["path"])
    assert restored.epoch == 1 and restored.kind == "savepoint"
    assert _sinks(runner)[0] == {"a": 11, "b": 2, "c": 3}
    runner.run(to="2026-11-01-03:00")
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)

    # a backfill from hour 3 restores the newest checkpoint before it and replays
    report = runner.run(from_="2026-11-01-03:00", to="2026-11-01-03:00")
    assert report.restored.epoch == 2 and [e.epoch for e in report.epochs] == [3]
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    # a backfill from hour 1 has nothing retained before it: refused, naming where a backfill can start, nothing changed
    oldest = min(runner.d.coordinator.store.all(), key=lambda c: int(c.metadata.epoch))
    assert oldest.is_savepoint and int(oldest.metadata.epoch) == 1
    with pytest.raises(PipelineError) as refused:
        runner.run(from_="2026-11-01-01:00", to="2026-11-01-01:00")
    assert str(refused.value) == (
        "no checkpoint or savepoint before partition 2026-11-01-01:00 is retained. Operator action: backfill from "
        f"2026-11-01-02:00 (after savepoint {int(oldest.checkpoint_id)} of partition 2026-11-01-01:00, the oldest "
        "retained) or from 2026-11-01-00:00 (from empty state) instead")
    assert runner.d.progress.load().last_done_epoch == 3 and _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    # a backfill from the first partition starts from empty state
    report = runner.run(from_="2026-11-01-00:00", to="2026-11-01-00:00")
    assert report.restored.checkpoint_id is None
    assert _sinks(runner)[0] == {"a": 1, "b": 2}


def test_gaps_and_user_errors_are_reported(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path))
    with pytest.raises(PipelineError, match="run from 2026-11-01-00:00 first"):
        runner.run(from_="2026-11-01-02:00", to="2026-11-01-02:00")
    toy.write_hour(tmp_path / "landing", 0, [])
    (tmp_path / "landing" / "dt=2026-11-01" / "hour=00" / "part-0000.jsonl").write_text('{"key": "a", "n": 1}\n')

    class Broken(toy.Sum):
        def process(self, ctx, inputs):
            raise ZeroDivisionError("boom")

    runner.d.pipeline.stages[1].__class__ = Broken
    with pytest.raises(StageError, match=r"stage 'sum' failed at epoch 0 \(partition 2026-11-01-00:00\): ZeroDivisionError: boom"):
        runner.run(to="2026-11-01-00:00")
    assert runner.d.progress.load().in_progress == 0


CRASH_POINTS = ["in_sink", "after_metadata", "in_retention"]  # after_state_write: tests/orchestration/test_cli_clickstream.py


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_at_named_point_then_rerun_equals_straight_run(spark, tmp_path, toy_registered, point):
    # interval 2: epoch 1 is the first checkpoint, so a kill before its commit restarts from empty
    # state and a kill after it (after_metadata ... in_retention) from that checkpoint
    config = _deploy(tmp_path, interval_epochs=2)
    env = child_env({**os.environ, "EPOCHAL_CRASH_AT": f"{point}:1"})  # the child imports tests.support
    killed = subprocess.run([sys.executable, "-m", toy.__name__, str(config), "2026-11-01-02:00"], env=env,
                            capture_output=True, timeout=600)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    runner = _runner(spark, config)
    runner.run(to="2026-11-01-02:00")
    expected_totals = {"a": 11, "b": 7, "c": 3}
    expected_log = [row for row in EXPECTED_LOG if row[0] <= 2]
    assert _sinks(runner) == (expected_totals, expected_log)
    assert {r.key: r.value for r in runner.d.keyed["sum"].values(toy.TOTAL).collect()} == expected_totals
