"""Retention on real Delta state tables: retain 2 over 5 epochs, an interrupted cleanup, exact file sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.state.checkpoint.completed import RetentionStatus
from epochal.state.checkpoint.testing import SimulatedCrash
from epochal.state.delta.log import DeltaLog
from epochal.state.delta.paths import resolve_table_url, to_url
from epochal.state.recovery.testing import CrashingDeleter, LifecycleHarness

pytestmark = pytest.mark.timeout(900)

EPOCHS = [
    ({"a": 1, "b": 2, "c": 3}, [1, 2]),
    ({"a": 4, "d": 5}, [3]),
    ({"b": None, "c": 6}, [4, 5, 6]),
    ({"e": 7, "a": None}, [7]),
    ({"d": 8, "f": 9}, [8, 9]),
]


def _data_files_on_disk(table_url: str) -> set[str]:
    root = Path(table_url.removeprefix("file://"))
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and "_delta_log" not in p.parts and not p.name.startswith(".")}


def _referenced(spark, table_url: str, versions: set[int]) -> set[str]:
    """Files of ``versions``: data files as Spark lists them, deletion vectors from the log."""
    root = table_url.removeprefix("file://")
    files = set()
    for version in versions:
        frame = spark.read.format("delta").option("versionAsOf", version).load(root)
        files |= {to_url(f).removeprefix(f"file://{root}/") for f in frame.inputFiles()}
        files |= {p for p in DeltaLog(table_url).snapshot(version).physical_files if "deletion_vector" in p}
    return files


def test_retain_two_over_five_epochs_with_an_interrupted_cleanup(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path, retain=2)
    for epoch, (totals, offsets) in enumerate(EPOCHS[:4]):
        h.run_epoch(epoch, totals, offsets)
    h.auto_release = False
    h.run_epoch(4, *EPOCHS[4])
    assert [e.checkpoint_id for e in h.store.awaiting_release()] == [3]

    crash = CrashingDeleter(2)
    with pytest.raises(SimulatedCrash):
        h.release(deleter=crash)
    assert len(crash.deleted) == 2 and [e.checkpoint_id for e in h.store.awaiting_release()] == [3]
    report = h.release()
    assert report.released == (3,) and h.store.get(3).status is RetentionStatus.RELEASED
    assert report.deleted_files > 0
    assert [cid for cid, _ in h.storage.list_checkpoint_dirs()] == [4, 5]

    retained = h.store.all()
    for state in ("total", "offsets"):
        url = resolve_table_url(retained[-1].metadata.handle("agg", state), retained[-1].metadata_path)
        versions = {DeltaLog(url).latest_version()} | {e.metadata.handle("agg", state).version for e in retained}
        assert _data_files_on_disk(url) == _referenced(spark, url, versions), f"exactly the referenced files of {state}"

    for checkpoint_id in (4, 5):
        h.restore(checkpoint_id)
        assert h.content() == h.expected_content(checkpoint_id), f"checkpoint {checkpoint_id} restores exactly"
