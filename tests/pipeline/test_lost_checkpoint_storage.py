"""A run never starts from empty state on top of sinks that already hold output (the checkpoint storage lost)."""

from __future__ import annotations

import shutil

import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner

pytestmark = pytest.mark.timeout(900)


def _runner(spark, tmp_path, checkpoints: str) -> EpochRunner:
    config = {
        "pipeline": "toy", "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / checkpoints), "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp_path / f"{checkpoints}.yaml"
    path.write_text(yaml.safe_dump(config))
    return EpochRunner(build_deployment(load_settings(path), spark))


def test_sinks_with_output_and_no_checkpoint_storage_refuse_to_run(spark, tmp_path, toy_registered):
    toy.write_hour(tmp_path / "landing", 0, [("a", 1), ("b", 2)])
    toy.write_hour(tmp_path / "landing", 1, [("a", 10)])
    runner = _runner(spark, tmp_path, "checkpoints")
    runner.run(to="2026-11-01-01:00")
    savepoint = runner.savepoint("keep")
    shutil.copytree(tmp_path / "checkpoints" / "savepoints" / "keep", tmp_path / "kept")
    shutil.rmtree(tmp_path / "checkpoints")
    before = {r.key: r.total for r in runner.d.sinks["totals"].read().collect()}

    lost = _runner(spark, tmp_path, "checkpoints")
    with pytest.raises(PipelineError) as caught:
        lost.run(to="2026-11-01-01:00")
    message = str(caught.value)
    assert "totals" in message and "log" in message and "holds no run position" in message
    assert "epochal restore --savepoint" in message
    assert {r.key: r.total for r in lost.d.sinks["totals"].read().collect()} == before, "nothing was written"

    elsewhere = _runner(spark, tmp_path, "other-checkpoints")  # a config pointing at another storage: same refusal
    with pytest.raises(PipelineError, match="other-checkpoints"):
        elsewhere.run(to="2026-11-01-00:00")

    restored = lost.restore(str(tmp_path / "kept"))  # the way out the message names
    assert restored.epoch == 1 and restored.sink_gap is None and savepoint["path"]
    lost.run(to="2026-11-01-01:00")
    assert {r.key: r.total for r in lost.d.sinks["totals"].read().collect()} == before


def test_a_restore_ahead_of_the_sinks_names_the_append_rows_it_cannot_bring_back():
    from epochal.pipeline.sinks import DeltaSink, forward_gap

    from types import SimpleNamespace

    pipeline = toy.build(SimpleNamespace(landing="/landing"))
    sinks = {spec.name: DeltaSink(None, "/warehouse", spec) for spec in pipeline.sinks}
    gap = forward_gap(sinks, position=1, restored_epoch=4)
    assert "log" in gap and "totals" not in gap and "epochs 2..4" in gap and "at or before epoch 1" in gap
    assert forward_gap(sinks, position=4, restored_epoch=4) is None  # a restore back or in place: nothing lost
    assert forward_gap(sinks, position=None, restored_epoch=4) is None  # a new deployment starts at the savepoint
