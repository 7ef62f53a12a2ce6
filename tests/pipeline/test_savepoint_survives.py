"""A savepoint survives the loss of everything else in the checkpoint storage (issue 19).

Only ``<checkpoints>/savepoints/`` is left (chk-*, shared/, the completed-checkpoint store, ids/,
the run position gone); the sinks are as they were. Restoring the savepoint, with or without
another parallelism, and running on gives the sinks and state of a straight run; the store lists the
savepoint again and new checkpoint ids come after its id. A copy of it restores into a new deployment.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.registry import PIPELINES, build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.checkpoint import CheckpointKind
from epochal.state.errors import RestoreFallbackWarning

pytestmark = pytest.mark.timeout(900)

HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)], [("b", 5)], [("a", 100), ("d", 7)]]
LAST = "2026-11-01-03:00"


@pytest.fixture()
def toy_registered(tmp_path):
    toy.register()
    for hour, rows in enumerate(HOURS):
        toy.write_hour(tmp_path / "landing", hour, rows)
    yield
    PIPELINES.pop("toy", None)


def _runner(spark, tmp_path: Path, checkpoints: str = "checkpoints", warehouse: str = "warehouse") -> EpochRunner:
    config = {
        "pipeline": "toy", "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / warehouse),
        "checkpoints": {"dir": str(tmp_path / checkpoints), "interval_epochs": 1, "retain": 2},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp_path / f"{checkpoints}.yaml"
    path.write_text(yaml.safe_dump(config))
    return EpochRunner(build_deployment(load_settings(path), spark))


def _lose_all_but_savepoints(base: Path) -> None:
    for child in base.iterdir():
        if child.name != "savepoints":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    assert [p.name for p in base.iterdir()] == ["savepoints"]


def _straight() -> tuple[dict[str, int], list[tuple[str, int]]]:
    """The sinks of a straight run over every hour: running totals, and each row logged once."""
    totals: dict[str, int] = {}
    for rows in HOURS:
        for key, n in rows:
            totals[key] = totals.get(key, 0) + n
    return totals, sorted(row for rows in HOURS for row in rows)


def _assert_straight(runner: EpochRunner) -> None:
    totals, log = _straight()
    d = runner.d
    assert {r.key: r.total for r in d.sinks["totals"].read().collect()} == totals
    assert sorted((r.key, r.n) for r in d.sinks["log"].read().collect()) == log, "every row once, none lost"
    assert {r.key: r.value for r in d.keyed["sum"].values(toy.TOTAL).collect()} == totals
    seen = d.operator["sum"].read_raw(toy.SEEN).where("subtask = 0").agg(F.max("value")).first()[0]
    assert seen == len(log), "the operator state counted every row once"


def _assert_ids_after(runner: EpochRunner, savepoint_id: int, savepoint_path: str) -> list[int]:
    """The store lists the savepoint, and the new checkpoints (folders too) with ids after its id."""
    entries = runner.d.coordinator.store.all()
    assert [(int(e.checkpoint_id), e.metadata_path) for e in entries if e.is_savepoint] == [(savepoint_id, savepoint_path)]
    new = [int(e.checkpoint_id) for e in entries if not e.is_savepoint]
    assert new and min(new) > savepoint_id, (savepoint_id, new)
    assert all(int(cid) > savepoint_id for cid, _ in runner.d.storage.list_checkpoint_dirs())
    return new


def test_a_savepoint_alone_restores_in_the_same_deployment_and_runs_on(spark, tmp_path, toy_registered):
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-01:00")  # checkpoints 1, 2
    taken = runner.savepoint("keep")  # checkpoint 3, epoch 1
    runner.run(to="2026-11-01-02:00")  # checkpoint 4: the sinks hold epoch 2, kept through the loss
    entry = runner.d.coordinator.store.latest(CheckpointKind.SAVEPOINT)
    assert (int(entry.checkpoint_id), int(entry.epoch), entry.metadata_path) == (3, 1, taken["path"] + "/_metadata")
    _lose_all_but_savepoints(tmp_path / "checkpoints")

    lost = _runner(spark, tmp_path)  # the store is rebuilt from what is left: `checkpoints list` shows the savepoint
    assert [(int(e.checkpoint_id), e.is_savepoint, e.metadata_path) for e in lost.d.coordinator.store.all()] == [
        (3, True, entry.metadata_path)
    ]
    restored = lost.restore(taken["path"])
    assert (restored.checkpoint_id, restored.kind, restored.epoch, restored.sink_gap) == (3, "savepoint", 1, None)
    assert set(restored.sinks_by_version) == {"totals", "log"}, "the kept sinks go back to the savepoint's versions"
    report = lost.run(to=LAST)
    assert [e.epoch for e in report.epochs] == [2, 3] and report.restored is None
    _assert_straight(lost)
    assert _assert_ids_after(lost, 3, entry.metadata_path) == [4, 5]


def test_a_savepoint_alone_restores_with_another_parallelism_and_into_a_new_deployment(spark, tmp_path, toy_registered):
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-01:00")  # checkpoints 1, 2
    taken = runner.savepoint("keep")  # checkpoint 3, epoch 1
    shutil.copytree(Path(taken["path"].removeprefix("file://")), tmp_path / "elsewhere" / "keep")
    _lose_all_but_savepoints(tmp_path / "checkpoints")

    lost = _runner(spark, tmp_path)
    restored = lost.restore("keep", parallelism=3)  # by name, rescaled
    assert (restored.checkpoint_id, restored.epoch, restored.parallelism) == (3, 1, 3)
    lost.run(to=LAST)
    _assert_straight(lost)
    _assert_ids_after(lost, 3, lost.d.coordinator.store.all()[0].metadata_path)
    latest = lost.d.coordinator.store.latest()
    assert {h.parallelism for h in latest.handles if h.stage == "sum"} == {3}, "the new parallelism is kept"

    _lose_all_but_savepoints(tmp_path / "checkpoints")  # lost again; this time a run, no restore first
    again = _runner(spark, tmp_path)
    report = again.run(to=LAST)
    assert (report.restored.checkpoint_id, report.restored.kind) == (3, "savepoint"), "the run restores it itself"
    assert [e.epoch for e in report.epochs] == [2, 3]
    _assert_straight(again)

    fresh = _runner(spark, tmp_path, "other-checkpoints", "other-warehouse")  # a new deployment
    restored = fresh.restore(str(tmp_path / "elsewhere" / "keep"), parallelism=1)
    assert (restored.checkpoint_id, restored.kind, restored.epoch) == (3, "savepoint", 1)
    assert fresh.d.coordinator.store.all() == [], "another deployment's savepoint is read, not adopted"
    fresh.run(to=LAST)
    assert {r.key: r.total for r in fresh.d.sinks["totals"].read().collect()} == _straight()[0]
    assert {r.key: r.value for r in fresh.d.keyed["sum"].values(toy.TOTAL).collect()} == _straight()[0]
    # append sinks of a new deployment start at the savepoint (Flink's way): the rows of epochs 2..3
    assert sorted((r.key, r.n) for r in fresh.d.sinks["log"].read().collect()) == sorted(HOURS[2] + HOURS[3])


def test_a_restore_without_a_pointer_takes_the_latest_checkpoint_a_savepoint_only_when_no_checkpoint_is_left(
    spark, tmp_path, toy_registered
):
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-01:00")  # checkpoints 1, 2
    taken = runner.savepoint("keep")  # checkpoint 3, epoch 1: newer than checkpoint 2, the same epoch
    restored = runner.restore()  # `epochal restore`: as Flink restarts, the latest completed checkpoint
    assert (restored.checkpoint_id, restored.kind, restored.epoch) == (2, "checkpoint", 1)
    for metadata in (tmp_path / "checkpoints").glob("chk-*/_metadata"):  # every checkpoint unusable: the savepoint
        metadata.write_text("{not json")
    with pytest.warns(RestoreFallbackWarning):
        restored = runner.restore()
    assert (restored.checkpoint_id, restored.kind) == (3, "savepoint")
    assert [s["checkpoint_id"] for s in restored.skipped] == [2, 1], restored.skipped
    _lose_all_but_savepoints(tmp_path / "checkpoints")

    lost = _runner(spark, tmp_path)
    restored = lost.restore()  # no checkpoint is retained: the savepoint, rather than refusing
    assert (restored.checkpoint_id, restored.kind, restored.epoch, restored.metadata_path) == (
        3, "savepoint", 1, taken["path"] + "/_metadata"
    )
    lost.run(to=LAST)
    _assert_straight(lost)
