"""A restore that dies half-way, recovery that must not jump forward, savepoints abandoned before
their commit, a lost run position file: the next run ends where a run without the accident does.

The deaths are simulated in-process (an exception no ``except Exception`` catches, raised at the
crash point), so the process's later steps (progress, lease release) are what a SIGKILL leaves
behind except for the lease, which a dead holder loses anyway; tests/pipeline/test_crash_matrix.py kills
real processes at the same points.
"""

from __future__ import annotations

import os

import pytest

from epochal.config import load_settings
from epochal.pipeline import recovery as recovery_module
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.deployment import CrashAwareCoordinator
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from tests.support.reliability_checks import compare_deployments, stray_folders

from tests.pipeline.test_runner import EXPECTED_LOG, EXPECTED_TOTALS, _deploy, _sinks

LAST = "2026-11-01-03:00"


class Died(BaseException):
    """The process died here."""


def _runner(spark, config) -> EpochRunner:
    return EpochRunner(build_deployment(load_settings(config), spark))


def _die_at(monkeypatch, point: str) -> None:
    real = recovery_module.crashpoint  # restores crash where recovery.py says so

    def crashpoint(name, epoch=None):
        if name == point:
            raise Died(name)
        real(name, epoch)

    monkeypatch.setattr(recovery_module, "crashpoint", crashpoint)


def _clean(spark, tmp_path):
    clean = _runner(spark, _deploy(tmp_path / "clean"))
    clean.run(to=LAST)
    return clean


def _assert_equal(spark, actual, clean) -> None:
    diffs = compare_deployments(spark, actual, clean)
    assert {name: d for name, d in diffs.items() if d.lost or d.extra} == {}


def test_a_restore_that_died_half_way_is_done_again_by_the_next_run(spark, tmp_path, monkeypatch, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to=LAST)
    epoch_2 = next(int(c.checkpoint_id) for c in runner.d.coordinator.store.all() if int(c.metadata.epoch) == 2)

    _die_at(monkeypatch, "in_restore")  # state tables restored; store, sinks and position not yet
    with pytest.raises(Died):
        runner.restore(epoch_2)
    monkeypatch.undo()
    progress = runner.d.progress.load()
    assert not progress.clean
    assert progress.restoring == {"pointer": str(epoch_2), "parallelism": None, "allow_non_restored_state": False}

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    report = again.run(to=LAST)
    assert report.restored.checkpoint_id == epoch_2 and report.restored.epoch == 2
    assert [e.epoch for e in report.epochs] == [3]  # replayed from the restored epoch, not from the old position
    assert _sinks(again) == (EXPECTED_TOTALS, EXPECTED_LOG)
    _assert_equal(spark, again, _clean(spark, tmp_path))


def test_a_restore_of_a_relative_savepoint_path_that_died_is_done_again_from_another_folder(
    spark, tmp_path, monkeypatch, toy_registered
):
    """``epochal restore --savepoint data/checkpoints/savepoints/x`` is relative to the shell's folder; the next run
    (a schedule, Dagster) starts elsewhere: progress.json records where the path led, not the text typed."""
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-01:00")
    folder = runner.d.storage.savepoint_dir("sp")
    runner.savepoint("sp")
    runner.run(to=LAST)
    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(folder.removeprefix("file://"), tmp_path)
    assert not relative.startswith("/")

    _die_at(monkeypatch, "in_restore")
    with pytest.raises(Died):
        runner.restore(relative)
    monkeypatch.undo()  # back to the folder pytest started in
    recorded = runner.d.progress.load().restoring["pointer"]
    assert recorded.startswith("file:///") and recorded.rstrip("/").endswith("savepoints/sp"), recorded

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    report = again.run(to=LAST)
    assert report.restored.kind == "savepoint" and report.restored.epoch == 1, report.restored
    assert [e.epoch for e in report.epochs] == [2, 3]
    assert _sinks(again) == (EXPECTED_TOTALS, EXPECTED_LOG)


def test_crash_recovery_never_restores_a_later_savepoint(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-01:00")
    runner.savepoint("early")
    runner.run(to=LAST)
    runner.savepoint("late")  # epoch 3, the newest id
    runner.restore(runner.d.storage.savepoint_dir("early"))  # back to epoch 1; "late" is kept
    runner.d.progress.start(2)  # the next run dies in epoch 2 before its checkpoint

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    report = again.run(to=LAST)
    assert report.restored.epoch == 1, report.restored  # "early", not the later "late"
    assert [e.epoch for e in report.epochs] == [2, 3]
    assert _sinks(again) == (EXPECTED_TOTALS, EXPECTED_LOG)


def test_a_savepoint_that_died_before_its_commit_frees_its_name(spark, tmp_path, monkeypatch, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-01:00")
    folder = runner.d.storage.savepoint_dir("before-upgrade")

    def die(self, completed):
        raise Died("after_metadata")

    monkeypatch.setattr(CrashAwareCoordinator, "_commit", die)
    with pytest.raises(Died):
        runner.savepoint("before-upgrade")
    monkeypatch.undo()
    assert runner.d.storage.exists(f"{folder}/_metadata") and runner.d.storage.exists(f"{folder}/_in_progress")

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    taken = again.savepoint("before-upgrade")  # the abandoned copy is discarded, the name is free
    assert taken["epoch"] == 1 and taken["path"] == folder
    assert not again.d.storage.exists(f"{folder}/_in_progress")
    assert stray_folders(again) == []
    again.run(to=LAST)
    again.restore(folder)
    assert _sinks(again)[0] == {"a": 11, "b": 2, "c": 3}


def test_retention_discards_abandoned_savepoints_but_not_foreign_ones(spark, tmp_path, monkeypatch, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-00:00")
    monkeypatch.setattr(CrashAwareCoordinator, "_commit", lambda self, completed: (_ for _ in ()).throw(Died()))
    with pytest.raises(Died):
        runner.savepoint(None)  # savepoint-<id>, killed after its _metadata
    monkeypatch.undo()
    storage = runner.d.storage
    foreign = storage.savepoint_dir("from-another-deployment")  # no marker: never epochal's to delete
    storage.write_atomic(f"{foreign}/_metadata", b"{}")
    [abandoned] = [n for n in storage.list_savepoints() if n.startswith("savepoint-")]

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    again.run(to="2026-11-01-01:00")  # retention after the epoch's checkpoint
    assert storage.list_savepoints() == ["from-another-deployment"], abandoned


def test_an_unnamed_savepoint_never_takes_the_folder_of_a_savepoint_a_user_named_like_it(spark, tmp_path, toy_registered):
    # Found from outside (probe 14): a user's savepoint named savepoint-<N>, where N is the id the next unnamed
    # savepoint gets. The unnamed one wrote its in-progress marker into that folder and was refused; the next
    # savepoint's clean-up took the folder for an abandoned savepoint and deleted it.
    runner = _runner(spark, _deploy(tmp_path / "d"))
    runner.run(to="2026-11-01-01:00")
    first = runner.savepoint("first")
    named = runner.savepoint(f"savepoint-{first['id'] + 2}")  # the id the next unnamed savepoint claims
    unnamed = runner.savepoint(None)
    assert unnamed["id"] == first["id"] + 2
    assert unnamed["name"] != named["name"] and unnamed["path"] != named["path"]
    runner.savepoint(None)  # discards abandoned savepoints first: there are none
    storage = runner.d.storage
    assert named["name"] in storage.list_savepoints() and unnamed["name"] in storage.list_savepoints()

    runner.run(to=LAST)
    runner.restore(named["name"])  # intact: a completed savepoint is restorable by its name
    runner.run(to=LAST)
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)


def test_retention_never_deletes_a_completed_savepoint_for_a_marker_that_is_not_its_own(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "d"))
    runner.run(to="2026-11-01-00:00")
    taken = runner.savepoint("kept")
    storage = runner.d.storage
    storage.write_atomic(f"{taken['path']}/_in_progress", str(taken["id"] + 7).encode())  # another savepoint's marker

    runner.run(to="2026-11-01-01:00")  # retention after the epoch's checkpoint
    assert storage.exists(f"{taken['path']}/_metadata")
    assert not storage.exists(f"{taken['path']}/_in_progress")
    runner.restore("kept")
    runner.run(to=LAST)
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)


def test_a_lost_run_position_file_restores_instead_of_replaying_on_top(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-01:00")
    runner.d.storage.delete_tree(runner.d.storage.child("progress.json"))

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    report = again.run(to=LAST)
    assert report.restored.epoch == 1
    assert [e.epoch for e in report.epochs] == [2, 3]
    assert _sinks(again) == (EXPECTED_TOTALS, EXPECTED_LOG)  # not the totals of epochs 0 and 1 counted twice


def test_a_backfill_from_the_first_partition_is_the_way_out_after_a_crash(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path / "crashed"))
    runner.run(to="2026-11-01-01:00")
    runner.savepoint("sc")
    runner.d.progress.start(2)
    for entry in runner.d.coordinator.store.all():  # every checkpoint and savepoint unusable
        runner.d.storage.write_atomic(entry.metadata_path, b"garbage")

    again = _runner(spark, _deploy(tmp_path / "crashed"))
    with pytest.raises(Exception, match="checkpoint"):
        again.run(to=LAST)  # never from empty state on its own
    with pytest.raises(PipelineError, match="no usable checkpoint or savepoint before the backfill's start") as refused:
        again.run(from_="2026-11-01-02:00", to=LAST)
    assert "savepoint 'sc' (id" in str(refused.value)  # named as the user named it, not as "checkpoint <id>"
    assert "backfill from the first partition (2026-11-01-00:00" in str(refused.value)
    report = again.run(from_="2026-11-01-00:00", to=LAST)
    assert report.restored.epoch is None
    assert _sinks(again) == (EXPECTED_TOTALS, EXPECTED_LOG)
