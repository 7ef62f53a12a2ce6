"""A failed checkpoint is never silent (Flink's failed job): past ``checkpoints.tolerable_failures`` the run
stops with a non-zero exit naming the epoch and the reason, later runs refuse until a restore or
``epochal checkpoints reset-failures`` clears the failure, and then the pipeline runs on to a straight run's sinks.

Checkpoints are made to fail for real: a ``timeout_s`` shorter than any epoch expires each one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from epochal.config import load_settings
from epochal.pipeline.errors import PipelineFailedError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.errors import CheckpointNotRestorable
from tests.support.user_package import EPOCHS, ROWS_MODULE, TOTALS_MODULE, on_import_path, write_landing

LAST = "2026-11-01-02:00"
EPOCHAL = str(Path(sys.executable).with_name("epochal"))


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    with on_import_path(tmp_path / "site", "acme", {"rows": ROWS_MODULE, "totals": TOTALS_MODULE}, monkeypatch):
        write_landing(tmp_path, EPOCHS)
        _configure(tmp_path, timeout_s=0.001)
        yield tmp_path


def _configure(project: Path, **checkpoints) -> Path:
    config = {
        "pipeline": "acme.totals:build", "landing": "landing", "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
        "checkpoints": {"interval_epochs": 1, "retain": 2, **checkpoints},
    }
    (project / "epochal.yaml").write_text(yaml.safe_dump(config))
    return project / "epochal.yaml"


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EPOCHAL, *args, "--config", str(project / "epochal.yaml"), "--json"],
                          capture_output=True, text=True, timeout=900, cwd=project)


@pytest.mark.slow
def test_the_run_stops_non_zero_at_the_failed_checkpoint_and_runs_on_once_cleared(spark, project):
    failed = _cli(project, "run", "--to", LAST)
    assert failed.returncode == 1, failed.stderr[-3000:]
    document = json.loads(failed.stdout)
    assert [e["epoch"] for e in document["epochs"]] == [0]  # stopped there, not run on without checkpoints
    assert (document["failed"]["epoch"], document["failed"]["partition"]) == (0, "2026-11-01-00:00")
    assert "CHECKPOINT_EXPIRED" in document["failed"]["reason"]
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("epochal: run failed:")]
    assert "epoch 0" in line and "CHECKPOINT_EXPIRED" in line and "reset-failures" in line
    # said once, with one way out a user can take (found by a probe, 2026-12-06: both were said twice)
    assert line.lower().count("the pipeline failed") == 1 and line.count("fix the cause") == 1, line
    assert "CheckpointFailureManager" not in line

    runner = EpochRunner(build_deployment(load_settings(_configure(project)), spark))  # the cause fixed
    with pytest.raises(PipelineFailedError, match="the pipeline failed: .*CHECKPOINT_EXPIRED") as refused:
        runner.run(to=LAST)  # refused until cleared: no epoch ran
    assert str(refused.value).lower().count("the pipeline failed") == 1 and str(refused.value).count("Operator action") == 1
    assert runner.d.progress.load().last_done_epoch == 0

    reset = _cli(project, "checkpoints", "reset-failures")
    assert reset.returncode == 0, reset.stderr[-3000:]
    cleared = json.loads(reset.stdout)
    assert cleared["was_failed"] and "CHECKPOINT_EXPIRED" in " ".join(cleared["cleared"])

    runner = EpochRunner(build_deployment(load_settings(project / "epochal.yaml"), spark))
    report = runner.run(to=LAST)
    assert [(e.epoch, e.checkpoint_status) for e in report.epochs] == [(1, "completed"), (2, "completed")]
    totals = {r.key: r.total for r in runner.d.sinks["totals"].read().collect()}
    assert totals == {"a": 111, "b": 7}


def test_a_restore_clears_the_failure(spark, project):
    runner = EpochRunner(build_deployment(load_settings(_configure(project, tolerable_failures=1, timeout_s=600)), spark))
    runner.run(to="2026-11-01-00:00")  # checkpoint 1 completes
    runner = EpochRunner(build_deployment(load_settings(_configure(project, tolerable_failures=1, timeout_s=0.001)), spark))
    with pytest.raises(PipelineFailedError, match="at epoch 2") as info:
        runner.run(to=LAST)  # epoch 1's checkpoint fails (tolerated), epoch 2's fails the pipeline
    assert [e.epoch for e in info.value.report.epochs] == [1, 2]
    runner = EpochRunner(build_deployment(load_settings(_configure(project, timeout_s=600)), spark))
    expired = info.value.report.epochs[0].checkpoint_id
    with pytest.raises(CheckpointNotRestorable, match=rf"Checkpoint {expired} .* it failed at epoch 1 \(CHECKPOINT_EXPIRED"):
        runner.restore(expired)  # named as failed (probe 18: "a restore after it rewound the state", or forgotten)
    assert runner.restore().epoch == 0
    assert runner.d.coordinator.pipeline_failure is None
    assert [e.epoch for e in runner.run(to=LAST).epochs] == [1, 2]


# The running totals, whose stage raises in its second epoch (a user's bug, found in production).
FAILING_TOTALS_MODULE = TOTALS_MODULE.replace(
    "        batch = inputs",
    "        if ctx.info.epoch == 1:\n            raise KeyError('region')\n        batch = inputs",
)
assert "KeyError('region')" in FAILING_TOTALS_MODULE


def test_a_stage_error_shows_the_epochs_done_before_it_then_one_line_naming_the_stage_and_its_line(tmp_path,
                                                                                                   monkeypatch):
    with on_import_path(tmp_path / "site", "acme", {"rows": ROWS_MODULE, "totals": FAILING_TOTALS_MODULE}, monkeypatch):
        write_landing(tmp_path, EPOCHS)
        _configure(tmp_path)
        failed = subprocess.run([EPOCHAL, "run", "--to", LAST, "--config", str(tmp_path / "epochal.yaml")],
                                capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr[-3000:]
    rows = [line.split() for line in failed.stdout.splitlines()]
    assert [r[:2] for r in rows if r and r[0].isdigit()] == [["0", "2026-11-01-00:00"]], failed.stdout  # epoch 0 done
    last = failed.stderr.strip().splitlines()[-1]
    line = FAILING_TOTALS_MODULE.splitlines().index("            raise KeyError('region')") + 1
    assert last.startswith("epochal: error: stage 'sum' failed at epoch 1 (partition 2026-11-01-01:00): KeyError: "
                           "'region' (at "), last
    assert last.endswith(f"acme/totals.py:{line} in process)"), last


def test_a_failures_json_document_keeps_the_epochs_done_before_it(capsys):
    from epochal.orchestration.cli import _fail

    done = {"epochs": [{"epoch": 0, "partition": "2026-11-01-00:00", "duration_s": 1.0}], "restored": None}
    _fail("stage 'sum' failed at epoch 1", "StageError", True, done=done)
    out = capsys.readouterr()
    assert json.loads(out.out) == {**done, "ok": False, "error": "stage 'sum' failed at epoch 1", "error_type": "StageError"}
    assert out.err == "epochal: error: stage 'sum' failed at epoch 1\n"
