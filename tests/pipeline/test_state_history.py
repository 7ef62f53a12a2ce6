"""Snapshots off the state's history are never restored without being named (``state/checkpoint/lineage.py``).

Found from outside (probe 12, 2026-12-07): a savepoint taken before a replay of late data was the only snapshot
before a later backfill's range, once the catch-up had pushed the checkpoints out of retention; the backfill
restored it, rewound the sinks to it, and the late rows were gone, the run reported a success.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.toy_pipeline as toy
from epochal.pipeline.errors import PipelineError
from epochal.state.errors import CheckpointNotRestorable
from epochal.state.checkpoint.lineage import LINEAGE_FILE, RestoreRecord, history, on_history
from tests.pipeline.test_runner import _deploy, _runner, _sinks

EPOCHAL = str(Path(sys.executable).with_name("epochal"))


def _on(records, checkpoint_id, epoch):
    return on_history(records, history(records, None), checkpoint_id, epoch)


def test_a_replay_takes_the_later_snapshots_off_the_history_and_naming_one_brings_it_back():
    # ids 1..4: epochs 0..3; savepoint 5 at epoch 3; a replay restores id 1 (epoch 0) after id 5
    replay = [RestoreRecord(after=5, epoch=0, restored=1)]
    assert _on(replay, 1, 0), "the restored checkpoint is on the history"
    assert not _on(replay, 5, 3), "the savepoint of the replayed epochs is not"
    assert _on(replay, 6, 1) and _on(replay, 7, 3), "the replay's own checkpoints are"
    # the savepoint restored by name: its history again, the replay's snapshots of epochs 1..3 off it
    back = replay + [RestoreRecord(after=7, epoch=3, restored=5)]
    assert _on(back, 5, 3) and _on(back, 1, 0)
    assert not _on(back, 6, 1) and not _on(back, 7, 3)
    assert _on(back, 8, 4), "a checkpoint after it is"


def test_a_recovery_at_the_position_keeps_the_savepoints_and_another_deployments_savepoint_keeps_none():
    recovery = [RestoreRecord(after=9, epoch=5, restored=9)]  # the latest checkpoint, after a crash in epoch 6
    assert all(_on(recovery, i, e) for i, e in [(3, 2), (8, 5), (9, 5), (10, 6)])
    foreign = [RestoreRecord(after=500, epoch=4, restored=None)]  # another deployment's savepoint of epoch 4
    assert not _on(foreign, 3, 2) and not _on(foreign, 8, 5)
    assert _on(foreign, 501, 5)
    empty = [RestoreRecord(after=9, epoch=-1, restored=None)]  # a backfill from the first partition
    assert not _on(empty, 3, 0) and _on(empty, 10, 0)
    assert _on([], 3, 2), "a storage without restores has one history"


def test_a_snapshot_off_the_history_is_named_once_however_often_a_process_looks_for_one(tmp_path, caplog):
    """Probe 18: the warning "not restoring savepoint 'half' ... off the state's history" was printed three times in
    one run, once for each search for a snapshot to restore."""
    from types import SimpleNamespace

    from epochal.state.checkpoint.lineage import Lineage
    from epochal.state.checkpoint.storage import CheckpointStorage

    lineage = Lineage(CheckpointStorage(str(tmp_path / "checkpoints")))
    lineage.record(after=5, epoch=0, restored=1)  # a replay from id 1 after savepoint 5 (epoch 3)
    savepoint = SimpleNamespace(checkpoint_id=5, is_savepoint=True,
                                metadata=SimpleNamespace(epoch=3, savepoint_name="half"))
    with caplog.at_level("WARNING", logger="epochal"):
        for _ in range(3):
            assert lineage.split([savepoint], "for a backfill") == ([], [savepoint])
        assert Lineage(CheckpointStorage(str(tmp_path / "checkpoints"))).split([savepoint], "for a backfill")[1]
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["not restoring savepoint 'half' (id 5, epoch 3) for a backfill"]


@pytest.mark.slow
def test_a_backfill_never_restores_a_savepoint_a_replay_left_behind(spark, tmp_path: Path, toy_registered, caplog):
    runner = _runner(spark, _deploy(tmp_path, interval_epochs=1, retain=2))
    runner.run(to="2026-11-01-02:00")
    runner.savepoint("before-the-late-file")  # epoch 2
    replayed = max(int(c.checkpoint_id) for c in runner.d.coordinator.store.all() if not c.is_savepoint)
    late = tmp_path / "landing" / "dt=2026-11-01" / "hour=02" / "part-0001.jsonl"
    late.write_text(json.dumps({"key": "late", "n": 1000}) + "\n")
    runner.run(from_="2026-11-01-02:00", to="2026-11-01-02:00")  # the replay: from the checkpoint of epoch 1
    toy.write_hour(tmp_path / "landing", 4, [("e", 1)])
    runner.run(to="2026-11-01-04:00")  # the checkpoints of epochs 3 and 4 retained: none before epoch 3
    with_late = _sinks(runner)
    assert with_late[0]["late"] == 1000
    assert (tmp_path / "checkpoints" / LINEAGE_FILE).exists()
    with pytest.raises(CheckpointNotRestorable, match="a restore after it rewound the state to epoch 1"):
        runner.restore(replayed)  # the checkpoint of epoch 2 the replay removed: the message says why (probe 12)

    with caplog.at_level("WARNING", logger="epochal"), pytest.raises(PipelineError) as refused:
        runner.run(from_="2026-11-01-03:00", to="2026-11-01-04:00")
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not restoring savepoint 'before-the-late-file'")]
    assert len(warned) == 1, warned  # once, not once for each search of the run (probe 18: three times)
    message = str(refused.value)
    assert "savepoint 'before-the-late-file'" in message and "off the state's history" in message, message
    assert _sinks(runner) == with_late, "nothing rewound"
    listed = subprocess.run([EPOCHAL, "checkpoints", "list", "--config", str(tmp_path / "epochal.yaml"), "--json"],
                            capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    on = {c["name"] or c["id"]: c["on_history"] for c in json.loads(listed.stdout)["checkpoints"]}
    assert on.pop("before-the-late-file") is False and on and all(on.values()), on

    # Named, it is restored (the user goes back to that history), and from then on it is the history's again.
    restored = runner.restore("before-the-late-file")
    assert restored.epoch == 2 and "late" not in _sinks(runner)[0]
    assert [c.metadata.savepoint_name for c in runner.recovery.candidates_before(3)] == ["before-the-late-file"]
