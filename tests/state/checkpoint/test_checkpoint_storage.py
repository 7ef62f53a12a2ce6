"""CheckpointStorage: layout, atomic writes, listing, deletion guard, pointers, Spark paths."""

from __future__ import annotations

import os
import uuid

import pytest

from epochal.state.checkpoint import storage as storage_module
from epochal.state.errors import CheckpointNotFound, CheckpointStorageError, InvalidSavepointName
from epochal.state.checkpoint.storage import CheckpointStorage, PointerKind
from epochal.state.delta.paths import to_spark
from epochal.state.checkpoint.testing import SimulatedCrash


@pytest.fixture(params=["memory", "local"])
def storage(request, tmp_path) -> CheckpointStorage:
    if request.param == "memory":
        return CheckpointStorage(f"memory://storage-{uuid.uuid4().hex}/chk")
    return CheckpointStorage(str(tmp_path / "chk"))


def test_layout(storage: CheckpointStorage) -> None:
    base = storage.base_url
    assert storage.checkpoint_dir(7) == f"{base}/chk-7"
    assert storage.metadata_path(7) == f"{base}/chk-7/_metadata"
    assert storage.shared_dir("dedupe", "seen") == f"{base}/shared/dedupe/seen"
    assert storage.savepoint_dir("before-upgrade") == f"{base}/savepoints/before-upgrade"
    assert storage.savepoint_metadata_path("sp1") == f"{base}/savepoints/sp1/_metadata"


def test_local_base_is_a_file_url(tmp_path) -> None:
    assert CheckpointStorage(str(tmp_path)).base_url == f"file://{tmp_path}"


def test_separate_savepoints_folder(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"), savepoints_url=str(tmp_path / "sp"))
    assert storage.savepoint_dir("a") == f"file://{tmp_path}/sp/a"


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "", ".hidden", "a b", "x" * 200, "a..b", "é"])
def test_unsafe_savepoint_names_are_refused(storage: CheckpointStorage, name: str) -> None:
    with pytest.raises(InvalidSavepointName, match="Invalid savepoint name"):
        storage.savepoint_dir(name)


def test_write_read_exists_overwrite(storage: CheckpointStorage) -> None:
    path = storage.metadata_path(1)
    assert not storage.exists(path)
    storage.write_atomic(path, b"one")
    storage.write_atomic(path, b"two")
    assert storage.exists(path) and storage.read(path) == b"two"


def test_read_missing_names_the_path(storage: CheckpointStorage) -> None:
    with pytest.raises(CheckpointNotFound, match="No file at .*chk-9/_metadata"):
        storage.read(storage.metadata_path(9))


def test_list_checkpoint_dirs_sorted_numerically(storage: CheckpointStorage) -> None:
    for cid in (10, 2, 1):
        storage.write_atomic(storage.metadata_path(cid), b"x")
    storage.write_atomic(storage.child("shared", "a", "f"), b"x")
    storage.write_atomic(storage.savepoint_metadata_path("sp"), b"x")
    assert [cid for cid, _ in storage.list_checkpoint_dirs()] == [1, 2, 10]
    assert storage.list_checkpoint_dirs()[0][1] == storage.checkpoint_dir(1)
    assert storage.list_savepoints() == ["sp"]


def test_a_refused_listing_names_the_folder(storage: CheckpointStorage, monkeypatch) -> None:
    """Credentials the store refuses (s3fs raises PermissionError) name the folder being listed (probe 13), where
    a missing folder is an empty one."""
    def refused(path, **kwargs):
        raise PermissionError("The AWS Access Key Id you provided does not exist in our records.")

    monkeypatch.setattr(storage._fs, "ls", refused)
    with pytest.raises(CheckpointStorageError, match=r"^Could not list .*/savepoints: The AWS Access Key Id you "
                                                     r"provided does not exist in our records\. Operator action") as err:
        storage.list_savepoints()
    assert err.value.path == storage.savepoints_url


def test_delete_tree_only_inside_storage(storage: CheckpointStorage) -> None:
    storage.write_atomic(storage.metadata_path(3), b"x")
    storage.delete_tree(storage.checkpoint_dir(3))
    assert not storage.exists(storage.metadata_path(3))
    storage.delete_tree(storage.checkpoint_dir(4))  # absent: no error
    for outside in (storage.base_url, storage.base_url + "/../other", "memory:///elsewhere"):
        with pytest.raises(CheckpointStorageError, match="Refusing to delete"):
            storage.delete_tree(outside)


def test_create_exclusive(storage: CheckpointStorage) -> None:
    path = storage.child("ids", "1")
    assert storage.create_exclusive(path, b"a") is True
    assert storage.create_exclusive(path, b"b") is False
    assert storage.read(path) == b"a"


def test_local_write_crash_before_rename_keeps_the_old_file(tmp_path, monkeypatch) -> None:
    storage = CheckpointStorage(str(tmp_path))
    path = storage.metadata_path(1)
    storage.write_atomic(path, b"old")

    def crash(src, dst):
        raise SimulatedCrash()

    monkeypatch.setattr(storage_module.os, "replace", crash)
    with pytest.raises(SimulatedCrash):
        storage.write_atomic(path, b"new and longer")
    assert storage.read(path) == b"old"
    assert os.listdir(tmp_path / "chk-1") == ["_metadata"]


def test_local_write_crash_on_first_write_leaves_no_file(tmp_path, monkeypatch) -> None:
    storage = CheckpointStorage(str(tmp_path))
    monkeypatch.setattr(storage_module.os, "replace", lambda s, d: (_ for _ in ()).throw(SimulatedCrash()))
    with pytest.raises(SimulatedCrash):
        storage.write_atomic(storage.metadata_path(1), b"data")
    assert not storage.exists(storage.metadata_path(1))


def test_write_then_move_path_for_other_filesystems(tmp_path, monkeypatch) -> None:
    """Filesystems without atomic put use a temporary name in the same folder and a move."""
    storage = CheckpointStorage(f"memory://wtm-{uuid.uuid4().hex}")
    moves: list[tuple[str, str]] = []
    original_mv = storage._fs.mv

    def record_mv(src, dst, **kw):
        moves.append((src, dst))
        return original_mv(src, dst, **kw)

    monkeypatch.setattr(storage._fs, "mv", record_mv)
    monkeypatch.setattr(storage_module, "ATOMIC_PUT_PROTOCOLS", frozenset())
    storage.write_atomic(storage.metadata_path(1), b"data")
    assert storage.read(storage.metadata_path(1)) == b"data"
    (src, dst), = moves
    assert dst.endswith("/chk-1/_metadata") and "/chk-1/._metadata.tmp-" in src


def test_resolve_pointer_forms(storage: CheckpointStorage) -> None:
    storage.write_atomic(storage.metadata_path(5), b"x")
    storage.write_atomic(storage.savepoint_metadata_path("nightly"), b"x")
    by_id = storage.resolve_pointer(5)
    assert (by_id.kind, by_id.checkpoint_id, by_id.owned) == (PointerKind.CHECKPOINT_ID, 5, True)
    for pointer in ("chk-5", storage.checkpoint_dir(5), storage.metadata_path(5), storage.checkpoint_dir(5) + "/"):
        found = storage.resolve_pointer(pointer)
        assert (found.kind, found.checkpoint_id, found.owned) == (PointerKind.CHECKPOINT_PATH, 5, True)
        assert found.metadata_path == storage.metadata_path(5)
    for pointer in ("nightly", storage.savepoint_dir("nightly")):
        found = storage.resolve_pointer(pointer)
        assert (found.kind, found.checkpoint_id, found.owned) == (PointerKind.SAVEPOINT_PATH, None, True)
        assert found.metadata_path == storage.savepoint_metadata_path("nightly")


def test_resolve_pointer_plain_local_path(tmp_path) -> None:
    storage = CheckpointStorage(str(tmp_path / "chk"))
    storage.write_atomic(storage.metadata_path(2), b"x")
    found = storage.resolve_pointer(str(tmp_path / "chk" / "chk-2"))
    assert found.metadata_path == storage.metadata_path(2) and found.owned


def test_resolve_pointer_foreign_folder(tmp_path) -> None:
    other = CheckpointStorage(str(tmp_path / "other"))
    other.write_atomic(other.metadata_path(3), b"x")
    found = CheckpointStorage(str(tmp_path / "mine")).resolve_pointer(other.checkpoint_dir(3))
    assert found.checkpoint_id == 3 and not found.owned


@pytest.mark.parametrize("pointer", ["chk-77", "no-such-savepoint", "/nowhere/chk-1", "memory:///nowhere/sp"])
def test_resolve_pointer_missing_is_a_clear_error(storage: CheckpointStorage, pointer: str) -> None:
    with pytest.raises(CheckpointNotFound, match="No checkpoint or savepoint at .*no _metadata file found"):
        storage.resolve_pointer(pointer)


def test_to_spark() -> None:
    assert to_spark("file:///x/y") == "/x/y"  # Delta refuses file:/// in CREATE TABLE ... LOCATION
    assert to_spark("rel/p") == os.path.abspath("rel/p")
    assert to_spark("/abs/p") == "/abs/p"
    assert to_spark("s3://bucket/key") == "s3a://bucket/key"
    assert to_spark("s3a://bucket/key") == "s3a://bucket/key"
    assert to_spark("gs://bucket/key") == "gs://bucket/key"
    with pytest.raises(CheckpointStorageError, match="Spark cannot read fsspec memory URLs"):
        to_spark("memory:///x")
