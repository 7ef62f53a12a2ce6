"""Savepoints are self-contained: they restore with every chk-* and shared/ gone, and after being moved."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from epochal.state.delta.paths import resolve_handle_path
from epochal.state.recovery.testing import LifecycleHarness
from epochal.state.recovery.restore import RestoreAction

pytestmark = pytest.mark.timeout(600)


def test_savepoint_survives_deleting_checkpoints_and_shared_and_moving(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path / "a", retain=1)
    h.run_epoch(0, {"a": 1, "b": 2}, [1, 2, 3])
    savepoint = h.run_epoch(1, {"a": 3, "c": 4}, [4, 5, 6, 7], savepoint="before-upgrade")
    h.run_epoch(2, {"a": 100, "b": None}, [8])
    folder = tmp_path / "a" / "checkpoints" / "savepoints" / "before-upgrade"
    assert savepoint.location == f"file://{folder}"
    assert {x.table_path for x in savepoint.handles} == {"state/agg/total", "state/agg/offsets"}
    total = savepoint.metadata.handle("agg", "total")
    readable = spark.read.format("delta").option("versionAsOf", total.version).load(
        resolve_handle_path(total, savepoint.metadata_path)
    )
    assert readable.count() == 3, "a savepoint is readable by any Delta reader"

    for _, chk in h.storage.list_checkpoint_dirs():
        shutil.rmtree(chk.removeprefix("file://"))
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "shared")
    result = h.restore(str(folder))
    assert (result.checkpoint_id, result.epoch, result.kind.value) == (2, 1, "savepoint")
    assert {s.action for s in result.states} == {RestoreAction.COPY}
    assert h.content() == h.expected_content(2)
    schema = spark.read.format("delta").load(result.state("agg", "total").working_path).schema
    assert not schema["key"].nullable, "the working table is recreated with the exact schema"

    moved = tmp_path / "elsewhere" / "kept-savepoint"
    shutil.move(str(folder), str(moved))
    other = LifecycleHarness(spark, tmp_path / "b")  # another deployment, empty store and storage
    result = other.restore(str(moved), parallelism=3)
    assert result.metadata_path == f"file://{moved}/_metadata" and result.parallelism == 3
    assert other.totals() == h.expected_content(2).totals
    spread = other.offsets(3)
    assert sorted(v for _, v in spread) == [4, 5, 6, 7]
    assert Counter(s for s, _ in spread).keys() == {0, 1, 2}
