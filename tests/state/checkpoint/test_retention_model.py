"""Retention and the Delta log reader against synthetic Delta tables (no Spark).

``FakeTable`` writes real Delta log commits (adds, removes, deletion-vector
updates, overwrites, RESTOREs, failed writes that leave orphan files, classic
parquet checkpoints) and keeps its own record of the files live at each
version: the oracle the reader and retention are checked against.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochal.state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from epochal.state.checkpoint.metadata import CheckpointMetadata, serialize
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.testing import SimulatedCrash
from epochal.state.handles import StateHandle, StateKind
from epochal.state.delta.log import DeltaLog, decode_dv_uuid, dv_file, working_tables
from epochal.state.errors import SnapshotUnavailable
from epochal.state.recovery.testing import CrashingDeleter
from epochal.state.checkpoint.retention import release_subsumed

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "k", "type": "string", "nullable": False, "metadata": {}}]})
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def encode_dv_uuid(value: uuid.UUID) -> str:
    out = []
    raw = value.bytes
    for start in range(0, 16, 4):
        number = int.from_bytes(raw[start:start + 4], "big")
        chunk = []
        for _ in range(5):
            number, digit = divmod(number, 85)
            chunk.append(_Z85[digit])
        out.extend(reversed(chunk))
    return "".join(out)


class FakeTable:
    """A Delta table written by hand, with the live files of every version recorded."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "_delta_log").mkdir(parents=True)
        self.live: dict[str, dict | None] = {}  # data file -> deletion vector descriptor
        self.history: list[frozenset[str]] = []  # physical files live at each version
        self.entries: list[dict[str, dict | None]] = []
        self._n = 0
        self._commit([{"metaData": {"id": "t", "schemaString": SCHEMA, "configuration": {"epochal.x": "1"},
                                    "format": {"provider": "parquet"}, "partitionColumns": []}}])

    @property
    def version(self) -> int:
        return len(self.history) - 1

    @property
    def url(self) -> str:
        return f"file://{self.root}"

    def _new_file(self, name: str) -> str:
        path = self.root / name
        path.write_bytes(b"x" * 10)
        path.with_name(f".{path.name}.crc").write_bytes(b"c")
        return name

    def _data(self) -> str:
        self._n += 1
        return self._new_file(f"part-{self._n:05d}-{uuid.uuid4()}.parquet")

    def _dv(self) -> dict:
        ident = uuid.uuid4()
        prefix = "ab" if self._n % 3 == 0 else ""
        if prefix:
            (self.root / prefix).mkdir(exist_ok=True)
        self._new_file(f"{prefix + '/' if prefix else ''}deletion_vector_{ident}.bin")
        self._n += 1
        return {"storageType": "u", "pathOrInlineDv": prefix + encode_dv_uuid(ident), "offset": 1,
                "sizeInBytes": 10, "cardinality": 1}

    def _commit(self, actions: list[dict]) -> None:
        version = len(self.history)
        lines = [json.dumps({"commitInfo": {"timestamp": version}})] + [json.dumps(a) for a in actions]
        (self.root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
        self.entries.append(dict(self.live))
        self.history.append(self.physical(self.live))

    @staticmethod
    def physical(live: dict[str, dict | None]) -> frozenset[str]:
        return frozenset([*live, *(dv_file(dv) for dv in live.values() if dv)])

    def _add(self, path: str, dv: dict | None) -> dict:
        action = {"path": path, "size": 10, "dataChange": True}
        if dv:
            action["deletionVector"] = dv
        return {"add": action}

    def _remove(self, path: str, dv: dict | None) -> dict:
        action = {"path": path, "dataChange": True}
        if dv:
            action["deletionVector"] = dv
        return {"remove": action}

    # -- operations --------------------------------------------------------------------

    def append(self, n: int = 1) -> None:
        new = [self._data() for _ in range(n)]
        self.live.update(dict.fromkeys(new))
        self._commit([self._add(p, None) for p in new])

    def delete_rows(self, index: int) -> None:
        """A MERGE deleting rows of one file: the file is re-added with a new deletion vector."""
        if not self.live:
            return self.append()
        path = sorted(self.live)[index % len(self.live)]
        old, new = self.live[path], self._dv()
        self.live[path] = new
        self._commit([self._remove(path, old), self._add(path, new)])

    def overwrite(self) -> None:
        removed = dict(self.live)
        new = self._data()
        self.live = {new: None}
        self._commit([self._remove(p, dv) for p, dv in removed.items()] + [self._add(new, None)])

    def restore(self, version: int) -> None:
        """Delta RESTORE: the files of ``version`` re-added, the others removed."""
        target = self.entries[version]
        actions = [self._remove(p, dv) for p, dv in self.live.items() if target.get(p, "absent") != dv]
        actions += [self._add(p, dv) for p, dv in target.items() if self.live.get(p, "absent") != dv]
        self.live = dict(target)
        self._commit(actions)

    def failed_write(self) -> None:
        """A write that crashed before its commit: an orphan file nothing references."""
        self._data()

    def checkpoint(self) -> None:
        """A classic parquet checkpoint of the current version (as Delta writes every 10 commits)."""
        dv_type = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                             ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())])
        add_type = pa.struct([("path", pa.string()), ("size", pa.int64()), ("deletionVector", dv_type)])
        meta_type = pa.struct([("id", pa.string()), ("schemaString", pa.string()),
                               ("configuration", pa.map_(pa.string(), pa.string()))])
        rows_add = [None] + [{"path": p, "size": 10, "deletionVector": dv} for p, dv in sorted(self.live.items())]
        rows_meta = [{"id": "t", "schemaString": SCHEMA, "configuration": [("epochal.x", "1")]}] + [None] * len(self.live)
        table = pa.table({"add": pa.array(rows_add, add_type), "metaData": pa.array(rows_meta, meta_type)})
        pq.write_table(table, self.root / "_delta_log" / f"{self.version:020d}.checkpoint.parquet")

    def on_disk(self) -> set[str]:
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*")
                if p.is_file() and not str(p.relative_to(self.root)).startswith("_") and not p.name.startswith(".")}

    def crc_owners_on_disk(self) -> set[str]:
        """The files whose ``.<name>.crc`` sibling is on disk."""
        crcs = (p for p in self.root.rglob(".*.crc") if "_delta_log" not in p.parts)
        return {str(p.with_name(p.name[1:-len(".crc")]).relative_to(self.root)) for p in crcs}


# ------------------------------------------------------------------------ log reader


def test_dv_uuid_round_trip_and_paths() -> None:
    ident = uuid.uuid4()
    assert decode_dv_uuid(encode_dv_uuid(ident)) == ident
    # as written by Delta 3.3 in this project's state tables
    assert str(decode_dv_uuid("S2Be<fW@!tK>&ZLIPpvf")) == "a81ad45c-30d4-4ccb-91dd-4cc88ac7838e"
    assert dv_file({"storageType": "u", "pathOrInlineDv": "zz" + encode_dv_uuid(ident)}) == f"zz/deletion_vector_{ident}.bin"
    assert dv_file({"storageType": "i", "pathOrInlineDv": "abc"}) is None


def test_reader_matches_the_oracle_from_commits_and_from_a_checkpoint(tmp_path) -> None:
    table = FakeTable(tmp_path / "t")
    table.append(2)
    table.delete_rows(0)
    table.delete_rows(0)
    table.overwrite()
    table.append(1)
    table.restore(2)
    table.checkpoint()
    table.delete_rows(1)
    log = DeltaLog(str(table.root))
    assert log.latest_version() == table.version
    expected = {v: table.history[v] for v in range(table.version + 1)}
    got = log.snapshots(range(table.version + 1))
    assert {v: s.physical_files for v, s in got.items()} == expected
    assert got[3].configuration == {"epochal.x": "1"} and got[3].schema["k"].nullable is False

    for version in range(7):  # the checkpoint at 6 must now stand in for the lost commits
        (table.root / "_delta_log" / f"{version:020d}.json").unlink()
    assert {v: s.physical_files for v, s in log.snapshots([6, 7]).items()} == {6: expected[6], 7: expected[7]}
    assert log.snapshot(6).configuration == {"epochal.x": "1"}
    with pytest.raises(SnapshotUnavailable, match="no longer covers version 5: commit 0 is missing"):
        log.snapshot(5)
    with pytest.raises(SnapshotUnavailable, match="Version 9 of .* does not exist .*latest version is 7"):
        log.snapshot(9)


def test_missing_files_and_orphans(tmp_path) -> None:
    table = FakeTable(tmp_path / "t")
    table.append(2)
    table.delete_rows(0)
    table.failed_write()
    log = DeltaLog(str(table.root))
    snapshot = log.snapshot(2)
    assert log.missing_files(snapshot) == []
    dv = next(p for p in snapshot.physical_files if "deletion_vector" in p)
    (table.root / dv).unlink()
    assert log.missing_files(snapshot) == [dv]
    assert len(log.files_on_disk()) == 4, "two data files, one orphan, and the crc of the deleted vector"


# ---------------------------------------------------------------------------- retention


class Deployment:
    """Checkpoint storage with synthetic working tables and an in-memory store."""

    def __init__(self, base: Path, tables: int, retain: int) -> None:
        self.storage = CheckpointStorage(f"file://{base}/checkpoints")
        self.store = InMemoryCompletedCheckpointStore(retain)
        self.tables = [FakeTable(base / "checkpoints" / "shared" / "stage" / f"s{i}") for i in range(tables)]
        self.next_id = 1

    def checkpoint(self, epoch: int, *, savepoint: bool = False) -> CompletedCheckpoint:
        cid, self.next_id = self.next_id, self.next_id + 1
        handles = tuple(
            StateHandle(stage="stage", state=f"s{i}", kind=StateKind.KEYED, state_type="value", table_path=t.url,
                        version=t.version, rows=1, bytes_total=1, bytes_added=1, schema_json=SCHEMA)
            for i, t in enumerate(self.tables)
        )
        name = f"sp-{cid}" if savepoint else None
        metadata = CheckpointMetadata.create(
            checkpoint_id=cid, epoch=epoch, triggered_at=T0 + timedelta(minutes=cid),
            completed_at=T0 + timedelta(minutes=cid), handles=handles,
            kind="savepoint" if savepoint else "checkpoint", savepoint_name=name,
        )
        path = self.storage.savepoint_metadata_path(name) if savepoint else self.storage.metadata_path(cid)
        self.storage.write_atomic(path, serialize(metadata))
        completed = CompletedCheckpoint(metadata=metadata, metadata_path=path)
        self.store.add(completed)
        return completed

    def needed(self, table_index: int) -> set[str]:
        table = self.tables[table_index]
        versions = {table.version} | {h.version for e in self.store.all() for h in e.handles if h.state == f"s{table_index}"}
        return set().union(*(table.history[v] for v in versions))

    def check(self) -> None:
        """Nothing needed is gone; nothing unneeded is left (crc siblings included)."""
        for i, table in enumerate(self.tables):
            needed, on_disk = self.needed(i), table.on_disk()
            assert needed <= on_disk, f"retention deleted needed files of s{i}: {sorted(needed - on_disk)}"
            assert on_disk <= needed, f"unreferenced files left in s{i}: {sorted(on_disk - needed)}"
            assert table.crc_owners_on_disk() <= needed, "checksum siblings go with their files"


OPS = st.sampled_from(["append", "delete_rows", "overwrite", "restore", "failed_write", "checkpoint_log", "none"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    retain=st.integers(min_value=1, max_value=3),
    epochs=st.lists(st.tuples(OPS, OPS, st.integers(0, 5), st.booleans(), st.integers(0, 6)), min_size=1, max_size=9),
)
def test_retention_never_deletes_a_needed_file_and_leaves_no_unreferenced_one(tmp_path_factory, retain, epochs) -> None:
    d = Deployment(tmp_path_factory.mktemp("ret"), tables=2, retain=retain)
    for epoch, (op0, op1, arg, savepoint, crash_after) in enumerate(epochs):
        for table, op in zip(d.tables, (op0, op1)):
            _apply(table, op, arg, d)
        d.checkpoint(epoch, savepoint=savepoint and epoch % 3 == 0)
        if crash_after < 3:
            try:
                release_subsumed(None, d.store, d.storage, deleter=CrashingDeleter(crash_after))
            except SimulatedCrash:
                for i, table in enumerate(d.tables):
                    assert d.needed(i) <= table.on_disk(), "a crash mid-cleanup never loses a needed file"
        report = release_subsumed(None, d.store, d.storage)
        d.check()
        assert not d.store.awaiting_release() and all(d.store.get(i).status is RetentionStatus.RELEASED for i in report.released)
        assert [int(c.split("chk-")[1]) for _, c in d.storage.list_checkpoint_dirs()] == sorted(
            int(e.checkpoint_id) for e in d.store.all() if not e.is_savepoint
        )


def _apply(table: FakeTable, op: str, arg: int, d: Deployment) -> None:
    if op == "append":
        table.append(1 + arg % 2)
    elif op == "delete_rows":
        table.delete_rows(arg)
    elif op == "overwrite":
        table.overwrite()
    elif op == "restore":
        retained = sorted({h.version for e in d.store.all() for h in e.handles if h.table_path == table.url})
        if retained:
            table.restore(retained[arg % len(retained)])
    elif op == "failed_write":
        table.failed_write()
    elif op == "checkpoint_log":
        table.checkpoint()


def test_subsumed_and_uncommitted_folders_go_savepoints_stay(tmp_path) -> None:
    d = Deployment(tmp_path, tables=1, retain=1)
    d.tables[0].append(1)
    d.checkpoint(0)
    d.checkpoint(1, savepoint=True)
    d.tables[0].overwrite()
    d.checkpoint(2)
    d.storage.write_atomic(d.storage.metadata_path(9), b"{}")  # a completion that never committed
    report = release_subsumed(None, d.store, d.storage)
    assert report.released == (1,) and report.deleted_checkpoint_dirs == (d.storage.checkpoint_dir(1),)
    assert report.deleted_uncommitted_dirs == (d.storage.checkpoint_dir(9),)
    assert [cid for cid, _ in d.storage.list_checkpoint_dirs()] == [3]
    assert d.storage.exists(d.storage.savepoint_metadata_path("sp-2"))
    d.check()
    assert d.tables[0].history[1] <= d.tables[0].on_disk(), "the savepoint still references version 1"
    assert working_tables(d.storage.shared_url) == [("stage", "s0", d.tables[0].url)]
    again = release_subsumed(None, d.store, d.storage)
    assert (again.released, again.deleted_files, again.deleted_uncommitted_dirs) == ((), 0, ())
