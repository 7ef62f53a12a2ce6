"""Restoring the latest checkpoint skips unusable ones with a warning; explicit pointers never fall back."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.state.delta.log import DeltaLog
from epochal.state.errors import CheckpointNotRestorable, NoRestorableCheckpoint, RestoreFallbackWarning
from epochal.state.delta.paths import resolve_table_url
from epochal.state.recovery.testing import TOTAL, LifecycleHarness
from epochal.state.recovery.restore import RestoreAction, reset_to_empty

pytestmark = pytest.mark.timeout(600)


def _local(url: str) -> Path:
    return Path(url.removeprefix("file://"))


def test_latest_falls_back_past_unusable_checkpoints_and_never_starts_empty(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path, retain=3, with_operator=False)
    for epoch, totals in enumerate([{"a": 1, "b": 2}, {"a": 2, "c": 7}, {"b": 5}]):
        h.run_epoch(epoch, totals)

    _local(h.storage.metadata_path(3)).write_text("garbage")
    with pytest.warns(RestoreFallbackWarning, match=r"Skipping checkpoint 3 \(.*chk-3/_metadata\).*corrupt"):
        result = h.restore()
    assert (result.checkpoint_id, [s.checkpoint_id for s in result.skipped]) == (2, [3])
    assert h.totals() == h.expected_content(2).totals

    with pytest.raises(CheckpointNotRestorable, match=r"Checkpoint 3 cannot be restored: .*chk-3/_metadata.*corrupt"):
        h.restore(3)

    entry1, entry2 = h.store.get(1), h.store.get(2)
    handle1, handle2 = entry1.metadata.handle("agg", "total"), entry2.metadata.handle("agg", "total")
    table = DeltaLog(resolve_table_url(handle2, entry2.metadata_path))
    only_in_2 = sorted(table.snapshot(handle2.version).physical_files - table.snapshot(handle1.version).physical_files)
    (_local(table.url) / only_in_2[0]).unlink()
    with pytest.warns(RestoreFallbackWarning) as caught:
        result = h.restore()
    messages = [str(w.message) for w in caught]
    assert any("checkpoint 2" in m and only_in_2[0] in m and "missing" in m for m in messages), messages
    assert (result.checkpoint_id, [s.checkpoint_id for s in result.skipped]) == (1, [3, 2])
    assert result.states[0].action is RestoreAction.DELTA_RESTORE
    assert h.totals() == h.expected_content(1).totals

    _local(h.storage.metadata_path(1)).unlink()
    with pytest.warns(RestoreFallbackWarning), pytest.raises(NoRestorableCheckpoint) as failure:
        h.restore()
    text = str(failure.value)
    assert "None of the 3 retained checkpoints can be restored" in text and "NOT reset to empty" in text
    assert "checkpoint 1: No file at" in text and "checkpoint 2: State agg/total" in text
    assert h.totals() == h.expected_content(1).totals, "a failed restore changes nothing"


def test_empty_start_only_when_nothing_was_ever_completed(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path, with_operator=False)
    h.keyed.update(TOTAL, spark.createDataFrame([("a", 1)], "key string, value long"))  # a first run that died
    result = h.restore()
    assert result.started_empty and [(s.key, s.action) for s in result.states] == [("agg/total", RestoreAction.EMPTIED)]
    assert h.totals() == {}

    h.run_epoch(0, {"b": 2})
    reset_to_empty(spark, h.storage, targets=h.targets())  # a backfill from the first partition
    assert h.totals() == {}
    assert h.restore(1).checkpoint_id == 1 and h.totals() == {"b": 2}, "emptying keeps the checkpointed versions"
