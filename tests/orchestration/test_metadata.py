"""The ``checkpoint`` asset's materialization metadata: where the epoch's time went, per step."""

from __future__ import annotations

from epochal.orchestration.metadata import checkpoint_metadata, stage_metadata
from epochal.pipeline.runner import EpochReport


def _report() -> EpochReport:
    steps = {
        "begin": {"s": 0.001, "jobs": 0, "compiled": 0},
        "stage:totals": {"s": 2.5, "jobs": 32, "compiled": 10},
        "sink:totals": {"s": 0.75, "jobs": 12, "compiled": 0},
    }
    return EpochReport(epoch=3, partition="2026-11-01-03:00", duration_s=3.3, steps=steps, spark_jobs=44,
                       compiled_classes=10, stages={"totals": {"duration_s": 2.5}}, input_bytes=2048, code="interpreted",
                       joins="shuffle")


def test_the_checkpoint_asset_shows_each_steps_seconds_jobs_and_compiled_classes():
    meta = checkpoint_metadata(_report())
    assert meta["spark_jobs"].value == 44 and meta["compiled_classes"].value == 10
    table = meta["steps"].value.splitlines()
    assert table[0] == "| step | seconds | Spark jobs | classes compiled |"
    assert "| stage:totals | 2.500 | 32 | 10 |" in table and "| sink:totals | 0.750 | 12 | 0 |" in table
    assert len(table) == 2 + 3
    assert meta["code"].value == "interpreted" and meta["input_bytes"].value == 2048 and meta["joins"].value == "shuffle"
    assert meta["delta_checksums"].value == "false"
    report = _report()
    report.checksums = True  # a run's last epoch
    assert checkpoint_metadata(report)["delta_checksums"].value == "true"


def test_an_epoch_of_unknown_size_shows_no_input_bytes():
    report = _report()
    report.input_bytes, report.code = None, "generated"
    meta = checkpoint_metadata(report)
    assert "input_bytes" not in meta and meta["code"].value == "generated"
    assert meta["steps"].value.splitlines()[0] == "| step | seconds | Spark jobs | classes compiled |"


def test_a_stage_asset_shows_its_own_steps_jobs():
    meta = stage_metadata(_report(), "totals")
    assert meta["spark_jobs"].value == 32 and meta["duration_s"].value == 2.5 and meta["epoch"].value == 3
