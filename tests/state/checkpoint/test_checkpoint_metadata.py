"""_metadata: frozen model, checksum, serialisation, migration chain, golden files of formats v1 and v2."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from epochal.config.models import CheckpointMode
from epochal.state.errors import CorruptMetadataError, InvalidCheckpointRequest, UnsupportedMetadataVersion
from epochal.state.checkpoint.metadata import (
    FORMAT_VERSION,
    MIGRATIONS,
    CheckpointKind,
    CheckpointMetadata,
    SinkPosition,
    TaskAckInfo,
    content_checksum,
    deserialize,
    require_json,
    serialize,
    upgrade,
)
from epochal.state.checkpoint.testing import make_handle
from epochal.state.handles import StateHandle, StateKind
from tests.support.paths import DATA

GOLDEN_V1 = DATA / "metadata_v1.json"
GOLDEN_V2 = DATA / "metadata_v2.json"
T0 = datetime(2026, 11, 1, 13, 0, tzinfo=timezone.utc)


def _handle(stage: str, state: str, version: int, *, rows: int, bytes_added: int) -> StateHandle:
    return StateHandle(
        stage=stage, state=state, kind=StateKind.KEYED, state_type="value",
        table_path=f"file:///tmp/epochal-test/{stage}/{state}", version=version, rows=rows,
        bytes_total=bytes_added * (version + 1), bytes_added=bytes_added,
        schema_json='{"type":"struct","fields":[]}', max_parallelism=128, parallelism=2,
    )


def golden_metadata(**extra) -> CheckpointMetadata:
    """The record tests/data/metadata_v1.json holds (read as the current version); ``extra`` adds fields."""
    handles = (_handle("dedupe", "seen", 3, rows=120, bytes_added=512), _handle("sessions", "open", 2, rows=10, bytes_added=100))
    return CheckpointMetadata.create(
        checkpoint_id=42, epoch=7, kind=CheckpointKind.CHECKPOINT, mode=CheckpointMode.INCREMENTAL,
        triggered_at=T0, completed_at=T0 + timedelta(seconds=12.5),
        source_positions={"landing": {"partition": "2026-11-01-13:00", "files": ["a.jsonl", "b.jsonl"]}},
        hook_states={"kafka-offsets": {"0": 1234}},
        handles=handles,
        acks=(
            TaskAckInfo(task="dedupe", acknowledged_at=T0 + timedelta(seconds=4), latency_s=4.0, handle_keys=("dedupe/seen",)),
            TaskAckInfo(task="sessions", acknowledged_at=T0 + timedelta(seconds=9), latency_s=9.0, handle_keys=("sessions/open",)),
            TaskAckInfo(task="user_totals", acknowledged_at=T0 + timedelta(seconds=12), latency_s=12.0),
        ),
        max_parallelism=128,
        **extra,
    )


def golden_v2() -> CheckpointMetadata:
    """The record tests/data/metadata_v2.json holds: v1's, with its sinks' table versions."""
    return golden_metadata(sinks=(
        SinkPosition(sink="user_totals", table_path="file:///tmp/epochal-test/warehouse/user_totals", version=9, mode="upsert"),
        SinkPosition(sink="late_events", table_path="file:///tmp/epochal-test/warehouse/late_events", version=None, mode="append"),
    ))


def test_round_trip_and_frozen() -> None:
    meta = golden_metadata()
    assert deserialize(serialize(meta), path="p") == meta
    with pytest.raises(ValidationError):
        meta.epoch = 8  # type: ignore[misc]


def test_derived_values() -> None:
    meta = golden_metadata()
    assert meta.state_rows == 130 and meta.bytes_written == 612
    assert meta.schemas == {"dedupe/seen": '{"type":"struct","fields":[]}', "sessions/open": '{"type":"struct","fields":[]}'}
    assert meta.duration_s == 12.5
    assert meta.handle("dedupe", "seen").version == 3 and meta.handle("x", "y") is None


def test_golden_file_v1_reads_as_v2_without_sink_versions() -> None:
    """Format version 1 must keep reading: upgraded, it records no sink versions (restore rewinds by content)."""
    meta = deserialize(GOLDEN_V1.read_bytes(), path=str(GOLDEN_V1))
    assert meta == golden_metadata()
    assert meta.format_version == FORMAT_VERSION == 2
    assert meta.sinks == () and meta.sink("user_totals") is None


def test_golden_file_v2_reads_and_is_stable() -> None:
    """What we write today is exactly v2."""
    data = GOLDEN_V2.read_bytes()
    assert deserialize(data, path=str(GOLDEN_V2)) == golden_v2()
    assert serialize(golden_v2()) == data
    assert golden_v2().sink("user_totals").version == 9


def test_checksum_detects_an_edit() -> None:
    document = json.loads(serialize(golden_metadata()))
    document["epoch"] = 8
    with pytest.raises(CorruptMetadataError, match=r"Checkpoint metadata s3://b/chk-42/_metadata is corrupt: its checksum"):
        deserialize(json.dumps(document).encode(), path="s3://b/chk-42/_metadata")


@pytest.mark.parametrize("cut", [1, 10, 100, -2])
def test_truncated_bytes_are_corrupt_and_name_the_path(cut: int) -> None:
    data = serialize(golden_metadata())[:cut]
    with pytest.raises(CorruptMetadataError, match=r"/x/chk-42/_metadata is corrupt: it is not valid JSON") as err:
        deserialize(data, path="/x/chk-42/_metadata")
    assert err.value.path == "/x/chk-42/_metadata"
    assert "Operator action: restore from another checkpoint" in str(err.value)


def test_not_an_object_and_binary_garbage() -> None:
    with pytest.raises(CorruptMetadataError, match="it is not a JSON object"):
        deserialize(b"[1, 2]", path="p")
    with pytest.raises(CorruptMetadataError, match=r"it has no checksum, so it is not a checkpoint's metadata \(its keys: none\)"):
        deserialize(b"{}", path="p")  # probe 18: "its checksum does not match its content (stored None)"
    with pytest.raises(CorruptMetadataError, match="not valid JSON"):
        deserialize(b"\xff\xfe\x00", path="p")


def test_valid_checksum_but_invalid_content_is_corrupt() -> None:
    document = json.loads(serialize(golden_metadata()))
    document["epoch"] = -1
    document["checksum"] = content_checksum(document)
    with pytest.raises(CorruptMetadataError, match=f"does not match format version {FORMAT_VERSION}"):
        deserialize(json.dumps(document).encode(), path="p")


def _document(version: int, **extra) -> dict:
    document = {**json.loads(serialize(golden_metadata())), "format_version": version, **extra}
    document["checksum"] = content_checksum(document)
    return document


def test_unknown_newer_version_has_no_upgrade_path() -> None:
    data = json.dumps(_document(FORMAT_VERSION + 1)).encode()
    with pytest.raises(UnsupportedMetadataVersion, match=rf"format version {FORMAT_VERSION + 1} \(written by a newer epochal\?\): no upgrade path to format version {FORMAT_VERSION}"):
        deserialize(data, path="p")


def test_older_version_without_migration_has_no_upgrade_path() -> None:
    with pytest.raises(UnsupportedMetadataVersion, match=f"format version 0: no upgrade path to format version {FORMAT_VERSION}"):
        deserialize(json.dumps(_document(0)).encode(), path="p")


def test_missing_version_is_corrupt() -> None:
    document = _document(1)
    del document["format_version"]
    document["checksum"] = content_checksum(document)
    with pytest.raises(CorruptMetadataError, match="format_version is missing"):
        deserialize(json.dumps(document).encode(), path="p")


def test_migration_chain_runs_each_step_in_order() -> None:
    steps = {0: lambda d: {**d, "trail": d["trail"] + [0]}, 1: lambda d: {**d, "trail": d["trail"] + [1]}}
    upgraded = upgrade({"format_version": 0, "trail": []}, path="p", migrations=steps, target=2)
    assert upgraded == {"format_version": 2, "trail": [0, 1]}
    with pytest.raises(UnsupportedMetadataVersion, match="no upgrade path to format version 3"):
        upgrade({"format_version": 0, "trail": []}, path="p", migrations=steps, target=3)


def test_deserialize_applies_a_migration_and_restamps_the_checksum() -> None:
    """A v0 document (say, before ``max_parallelism`` existed) upgraded by a registered migration."""
    old = _document(0)
    del old["max_parallelism"]
    old["checksum"] = content_checksum(old)
    migrations = {**MIGRATIONS, 0: lambda d: {**d, "max_parallelism": None}}
    meta = deserialize(json.dumps(old).encode(), path="p", migrations=migrations)
    assert meta.format_version == FORMAT_VERSION and meta.max_parallelism is None
    assert meta.checksum == content_checksum(meta.model_dump(mode="json"))


def test_model_rules() -> None:
    handle = make_handle("a")
    with pytest.raises(ValidationError, match="several handles for the same state: a/s"):
        CheckpointMetadata.create(checkpoint_id=1, epoch=0, triggered_at=T0, completed_at=T0, handles=(handle, handle))
    with pytest.raises(ValidationError, match="completed_at is before triggered_at"):
        CheckpointMetadata.create(checkpoint_id=1, epoch=0, triggered_at=T0, completed_at=T0 - timedelta(seconds=1))
    with pytest.raises(ValidationError, match="savepoint_name is set exactly for savepoints"):
        CheckpointMetadata.create(checkpoint_id=1, epoch=0, kind=CheckpointKind.SAVEPOINT, triggered_at=T0, completed_at=T0)
    with pytest.raises(ValidationError):
        CheckpointMetadata.create(checkpoint_id=1, epoch=0, triggered_at=datetime(2026, 1, 1), completed_at=T0)


def test_require_json() -> None:
    assert require_json({"a": [1, "x", None, 2.5]}, what="positions") == {"a": [1, "x", None, 2.5]}
    for bad in ({"a": {1, 2}}, {1: "int key"}, {"t": T0}, {"nan": float("nan")}, {"t": (1, 2)}):
        with pytest.raises(InvalidCheckpointRequest, match="positions must be plain JSON"):
            require_json(bad, what="positions")
