"""Savepoint names and paths cannot leave their folder: the coordinator, the runner and the CLI refuse them."""

from __future__ import annotations

import pytest

from epochal.orchestration.cli import main
from epochal.state.checkpoint import ManualClock
from epochal.state.errors import InvalidSavepointName
from epochal.state.checkpoint.factory import create_in_memory_coordinator
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.config.models import CheckpointSettings

ESCAPES = ["../x", "..", ".", "/etc/passwd", "a/b", "a\\b", "", " x", "x\x00", "s3://bucket/x", "file:///tmp/x",
           "~/x", "x/../../y", "-rf", "a" * 129, "\u00e9t\u00e9"]


@pytest.mark.parametrize("name", ESCAPES, ids=repr)
def test_the_coordinator_refuses_names_that_are_not_one_safe_segment(name) -> None:
    coordinator = create_in_memory_coordinator(CheckpointSettings(), clock=ManualClock())
    with pytest.raises(InvalidSavepointName, match="Invalid savepoint name") as caught:
        coordinator.trigger_savepoint(0, ["stage:x"], {}, name=name)
    assert repr(name) in str(caught.value)
    assert not coordinator.pending_checkpoints()


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "s3://b/x"])
def test_storage_never_builds_a_path_outside_the_savepoints_folder(tmp_path, name) -> None:
    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    with pytest.raises(InvalidSavepointName):
        storage.savepoint_dir(name)
    assert storage.savepoint_dir("ok-1.v2").endswith("/checkpoints/savepoints/ok-1.v2")


@pytest.mark.parametrize("name", ["../x", "a/b", "/abs", "s3://b/x"])
def test_the_cli_refuses_a_bad_name_before_starting_spark(name, capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["savepoint", "--name", name, "--config", "/nonexistent.yaml"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --name" in err and "Invalid savepoint name" in err and "nonexistent" not in err


@pytest.mark.parametrize("name", ["7", "chk-7", "ab\n"], ids=repr)
def test_a_savepoint_name_never_reads_as_a_checkpoint_pointer(name) -> None:
    coordinator = create_in_memory_coordinator(CheckpointSettings(), clock=ManualClock())
    with pytest.raises(InvalidSavepointName, match="Invalid savepoint name"):
        coordinator.trigger_savepoint(0, ["stage:x"], {}, name=name)


@pytest.mark.parametrize("pointer", ["3", "chk-3"])
def test_restore_savepoint_refuses_a_checkpoint_pointer(pointer, capsys) -> None:
    assert main(["restore", "--savepoint", pointer, "--config", "/nonexistent.yaml"]) != 0
    err = capsys.readouterr().err
    assert "names a checkpoint, not a savepoint" in err and "--checkpoint 3" in err


@pytest.mark.parametrize("pointer", ["abc", "before-upgrade", "savepoints/x"])
def test_restore_checkpoint_refuses_what_is_not_a_checkpoint_id(pointer, capsys) -> None:
    assert main(["restore", "--checkpoint", pointer, "--config", "/nonexistent.yaml"]) != 0
    err = capsys.readouterr().err
    assert "is not a checkpoint id" in err and "--savepoint" in err


@pytest.mark.parametrize("pointer", ["3", "chk-3", "chk-3/"])
def test_restore_checkpoint_takes_chk_id_as_the_id(pointer, tmp_path, capsys) -> None:
    # Found from outside (probe 14): `--checkpoint chk-3` of a checkpoint no longer retained was looked up as a
    # folder and refused as "Savepoint 'chk-3'", where `--checkpoint 3` said why checkpoint 3 cannot be restored.
    (tmp_path / "landing").mkdir()
    config = tmp_path / "epochal.yaml"
    config.write_text(f"pipeline: clickstream\nlanding: {tmp_path / 'landing'}\nwarehouse: {tmp_path / 'warehouse'}\n"
                      f"checkpoints: {{dir: {tmp_path / 'checkpoints'}}}\npartitions: {{start: 2026-11-01T00:00:00Z}}\n")
    assert main(["restore", "--checkpoint", pointer, "--config", str(config)]) != 0
    err = capsys.readouterr().err
    assert "Checkpoint 3 cannot be restored" in err and "Savepoint" not in err, err
    assert not (tmp_path / "checkpoints").exists(), "refused before the lease: nothing written (probe 14)"
