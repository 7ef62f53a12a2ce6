"""Two runs of one deployment at once: the lease lets one proceed and stops the other with a clear message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.errors import ConcurrentRunError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from tests.support.reliability_doc import markdown_table, write_section
from epochal.state.delta.paths import resolve_handle_path

pytestmark = pytest.mark.timeout(900)

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)]]


def _config(tmp: Path, pipeline: str) -> Path:
    config = {
        "pipeline": pipeline,
        "landing": str(tmp / "landing"),
        "warehouse": str(tmp / "warehouse"),
        "checkpoints": {"dir": str(tmp / "checkpoints"), "retain": 2},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16, "shuffle_partitions": 2},
    }
    path = tmp / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_savepoint_and_run_during_an_epoch_are_refused_then_the_savepoint_is_consistent(spark, tmp_path, toy_registered):
    for hour, rows in enumerate(HOURS):
        toy.write_hour(tmp_path / "landing", hour, rows)
    config = _config(tmp_path, "toy")
    other = EpochRunner(build_deployment(load_settings(config), spark))  # a second process's view
    refused: list[str] = []

    def during_epoch(report) -> None:  # called while the first run holds the lease, between epochs 0 and 1
        for attempt in (lambda: other.savepoint("during"), lambda: other.run(to="2026-11-01-01:00"),
                        lambda: other.restore()):
            with pytest.raises(ConcurrentRunError) as caught:
                attempt()
            refused.append(str(caught.value))

    first = EpochRunner(build_deployment(load_settings(config), spark), on_epoch=during_epoch)
    first.run(to="2026-11-01-01:00")
    assert len(refused) == 6, refused
    assert all(first.d.lease.holder in r and "command 'run'" in r for r in refused)
    assert not other.d.storage.exists(other.d.storage.savepoint_dir("during")), "a refused savepoint writes nothing"

    savepoint = other.savepoint("after")  # the lease is free: a savepoint of the completed position
    assert savepoint["epoch"] == 1
    entry = other.d.coordinator.store.get(savepoint["id"])
    for handle in entry.handles:
        copy = spark.read.format("delta").option("versionAsOf", handle.version).load(
            resolve_handle_path(handle, entry.metadata_path))
        working = spark.read.format("delta").load(str(tmp_path / "checkpoints" / "shared" / handle.stage / handle.state))
        assert copy.exceptAll(working).count() == 0 and working.exceptAll(copy).count() == 0, handle.key
    totals = {r.key: r.total for r in first.d.sinks["totals"].read().collect()}
    assert totals == {"a": 11, "b": 2, "c": 3}


@pytest.mark.slow
def test_a_second_epochal_run_exits_non_zero_naming_the_holder(spark, tmp_path):
    config = _config(tmp_path, "clickstream")
    (tmp_path / "landing").mkdir()  # a missing landing folder is refused first, before the lease (probe 13)
    holder = EpochRunner(build_deployment(load_settings(config), spark))
    with holder.d.lease.hold("run"):
        second = subprocess.run([EPOCHAL, "run", "--to", "2026-11-01-00:00", "--config", str(config)],
                                capture_output=True, text=True, timeout=600)
    errors = [line for line in second.stderr.splitlines() if line.startswith("epochal: error")]
    assert second.returncode != 0 and len(errors) == 1, second.stderr[-2000:]
    assert "holds the lease" in errors[0] and holder.d.lease.holder in errors[0], errors[0]
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "checkpoints" / "shared").exists()
    write_section(
        "concurrency", "Concurrent runs",
        "While one process holds the deployment's lease, a second `epochal run` on the same configuration exits "
        f"with status {second.returncode} before touching anything, printing:\n\n```text\n{errors[0]}\n```\n\n"
        + markdown_table(["attempt during a run", "outcome"], [
            ["`epochal run` (another process)", f"exit {second.returncode}, one line on stderr, nothing written"],
            ["savepoint, run, restore from another deployment object", "`ConcurrentRunError` naming the holder"],
            ["savepoint once the run is over", "taken at the completed position; its copies equal the state"],
        ]),
        test=__file__,
    )
