"""Restore round trips: incremental and full checkpoints, keyed and operator state, with and without rescale."""

from __future__ import annotations

from collections import Counter

import pytest

from epochal.config.models import CheckpointMode
from epochal.state.checkpoint.testing import RecordingHook
from epochal.state.delta.paths import resolve_handle_path
from epochal.state.recovery.testing import Content, LifecycleHarness
from epochal.state.recovery.restore import RestoreAction

pytestmark = pytest.mark.timeout(600)


def _assert_rescaled(harness: LifecycleHarness, expected: Content, parallelism: int) -> None:
    seen = harness.offsets(parallelism)
    assert sorted(v for _, v in seen) == sorted(expected.offsets), "split redistribution loses nothing"
    sizes = Counter(s for s, _ in seen)
    assert set(sizes) == set(range(parallelism))
    assert max(sizes.values()) - min(sizes.values()) <= 1


def test_incremental_checkpoint_restores_by_id_and_latest_with_rescale(spark, tmp_path) -> None:
    hook = RecordingHook("offsets-hook", state={"queue": 7})
    h = LifecycleHarness(spark, tmp_path, retain=3, hooks=[hook])
    h.run_epoch(0, {"a": 1, "b": 2}, [10, 11, 12])
    h.run_epoch(1, {"a": 5, "b": None, "c": 3}, [20, 21, 22, 23])

    result = h.restore(1)
    assert (result.checkpoint_id, result.epoch, result.source_positions) == (1, 0, {"source": {"epoch": 0}})
    assert {s.key: s.action for s in result.states} == {
        "agg/total": RestoreAction.DELTA_RESTORE, "agg/offsets": RestoreAction.DELTA_RESTORE,
    }
    assert h.content() == h.expected_content(1)
    assert hook.restored == [(1, {"queue": 7})], "the coordinator's restore path runs the master hooks"

    rescaled = h.restore(parallelism=3)
    assert (rescaled.checkpoint_id, rescaled.skipped) == (2, ())
    assert {s.key: (s.parallelism_before, s.parallelism_after) for s in rescaled.states} == {
        "agg/total": (2, 3), "agg/offsets": (2, 3),
    }
    assert h.totals() == h.expected_content(2).totals, "keyed state needs no data movement"
    _assert_rescaled(h, h.expected_content(2), 3)
    again = h.restore(2)
    assert {s.action for s in again.states} == {RestoreAction.UNCHANGED}, "no commit when already there"


def test_full_checkpoint_is_self_contained_and_restores_with_rescale(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path, retain=2, mode=CheckpointMode.FULL)
    first = h.run_epoch(0, {"a": 1, "b": 2}, [1, 2, 3, 4])
    h.run_epoch(1, {"a": 9}, [5, 6, 7, 8])
    handle = first.metadata.handle("agg", "total")
    assert handle.table_path == "state/agg/total", "full checkpoints name their copies relative to _metadata"
    copy = resolve_handle_path(handle, first.metadata_path)
    assert copy == str(tmp_path.resolve() / "checkpoints" / "chk-1" / "state" / "agg" / "total")
    copied = spark.read.format("delta").option("versionAsOf", handle.version).load(copy)
    assert {r.key: r.value for r in copied.collect()} == {"a": 1, "b": 2}
    props = spark.sql(f"DESCRIBE DETAIL delta.`{copy}`").first().properties
    assert props["epochal.maxParallelism"] == "16"
    assert props["delta.enableDeletionVectors"] == "false", "a copy is canonical: every Delta reader opens it"
    assert not copied.schema["key"].nullable, "the copy keeps the exact schema"

    result = h.restore(1)
    assert {s.action for s in result.states} == {RestoreAction.COPY}
    assert h.content() == h.expected_content(1)
    working = spark.sql(f"DESCRIBE DETAIL delta.`{h.keyed.table_path(h.total)}`").first().properties
    assert working["delta.enableDeletionVectors"] == "true", "the working table restored from a copy keeps deletion vectors"
    assert working["delta.checkpointInterval"] == "100", "and Delta checkpoints every 100 commits, not every 10"
    h.restore(2, parallelism=4)
    assert h.totals() == h.expected_content(2).totals
    _assert_rescaled(h, h.expected_content(2), 4)
