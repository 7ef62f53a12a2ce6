"""The ``_metadata`` file of a checkpoint or savepoint: a versioned, frozen model.

Format rules (dlt's persisted-state discipline):

* ``format_version`` names the layout; :data:`MIGRATIONS` upgrades an older
  document one version at a time, and a version with no path to
  :data:`FORMAT_VERSION` is a clear :class:`UnsupportedMetadataVersion`.
* ``checksum`` is the SHA-256 of the canonical JSON of every other field, so a
  truncated or edited file is a :class:`CorruptMetadataError` naming the path.
* A golden file of each released version lives in ``tests/data``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from epochal.config.models import CheckpointMode
from epochal.state.errors import CorruptMetadataError, InvalidCheckpointRequest, UnsupportedMetadataVersion
from epochal.state.handles import StateHandle
from epochal.state.ids import CheckpointId, Epoch

FORMAT_VERSION = 2
CHECKSUM_PREFIX = "sha256:"

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 records each sink's table version (``sinks``); a version-1 checkpoint recorded none."""
    return {**document, "format_version": 2, "sinks": []}


# version n -> the function turning a version-n document into a version n+1 document.
MIGRATIONS: Mapping[int, Migration] = {1: _v1_to_v2}


class CheckpointKind(str, Enum):
    CHECKPOINT = "checkpoint"
    SAVEPOINT = "savepoint"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaskAckInfo(_Frozen):
    """When one stage or sink acknowledged, and which state handles it reported."""

    task: str
    acknowledged_at: AwareDatetime
    latency_s: float = Field(ge=0, description="seconds from trigger to this acknowledgement")
    handle_keys: tuple[str, ...] = ()


class SinkPosition(_Frozen):
    """Where a sink's Delta table was when its task acknowledged (Flink's sink pre-commit).

    Restore brings the table back to ``version`` (one ``RESTORE`` commit a reader sees whole).
    ``version`` is None when the table did not exist yet.
    """

    sink: str
    table_path: str
    version: int | None = Field(default=None, ge=0)
    mode: str


class CheckpointMetadata(_Frozen):
    """Everything needed to restore one completed checkpoint or savepoint."""

    format_version: int = FORMAT_VERSION
    checkpoint_id: int = Field(ge=1)
    epoch: int = Field(ge=0)
    kind: CheckpointKind = CheckpointKind.CHECKPOINT
    mode: CheckpointMode = CheckpointMode.INCREMENTAL
    savepoint_name: str | None = None
    triggered_at: AwareDatetime
    completed_at: AwareDatetime
    source_positions: dict[str, Any] = Field(default_factory=dict)
    hook_states: dict[str, Any] = Field(default_factory=dict)
    handles: tuple[StateHandle, ...] = ()
    acks: tuple[TaskAckInfo, ...] = ()
    #: Each sink's table version at this epoch (none in checkpoints written before sinks were recorded).
    sinks: tuple[SinkPosition, ...] = ()
    max_parallelism: int | None = Field(default=None, ge=1)
    checksum: str

    @model_validator(mode="after")
    def _check(self) -> CheckpointMetadata:
        keys = [h.key for h in self.handles]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"several handles for the same state: {', '.join(duplicates)}")
        if self.completed_at < self.triggered_at:
            raise ValueError("completed_at is before triggered_at")
        if (self.kind is CheckpointKind.SAVEPOINT) != (self.savepoint_name is not None):
            raise ValueError("savepoint_name is set exactly for savepoints")
        return self

    @classmethod
    def create(cls, **fields: Any) -> CheckpointMetadata:
        """Build a metadata record and stamp its checksum."""
        document = cls.model_validate({**fields, "checksum": ""}).model_dump(mode="json")
        document["checksum"] = content_checksum(document)
        return cls.model_validate(document)

    @property
    def id(self) -> CheckpointId:
        return CheckpointId(self.checkpoint_id)

    @property
    def epoch_id(self) -> Epoch:
        return Epoch(self.epoch)

    @property
    def schemas(self) -> dict[str, str]:
        """Spark schema JSON of every state, by ``stage/state``."""
        return {h.key: h.schema_json for h in self.handles}

    @property
    def state_rows(self) -> int:
        return sum(h.rows for h in self.handles)

    @property
    def state_bytes(self) -> int:
        return sum(h.bytes_total for h in self.handles)

    @property
    def bytes_written(self) -> int:
        """Bytes this checkpoint added (the sum of the handles' ``bytes_added``)."""
        return sum(h.bytes_added for h in self.handles)

    @property
    def parallelism(self) -> int | None:
        """The parallelism the state was written with (its handles'; None when they record none)."""
        recorded = {h.parallelism for h in self.handles if h.parallelism is not None}
        return max(recorded) if recorded else None

    @property
    def duration_s(self) -> float:
        return (self.completed_at - self.triggered_at).total_seconds()

    def handle(self, stage: str, state: str) -> StateHandle | None:
        return next((h for h in self.handles if h.stage == stage and h.state == state), None)

    def sink(self, name: str) -> SinkPosition | None:
        return next((p for p in self.sinks if p.sink == name), None)


def canonical_json(value: Any) -> str:
    """Deterministic compact JSON (sorted keys) used for checksums."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_checksum(document: Mapping[str, Any]) -> str:
    """SHA-256 of every field but ``checksum``."""
    body = {k: v for k, v in document.items() if k != "checksum"}
    return CHECKSUM_PREFIX + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def require_json(value: Any, *, what: str) -> Any:
    """Return ``value`` if it survives a JSON round trip unchanged, else raise InvalidCheckpointRequest."""
    try:
        same = json.loads(canonical_json(value)) == value
    except (TypeError, ValueError):
        same = False
    if not same:
        raise InvalidCheckpointRequest(
            f"{what} must be plain JSON (dicts with string keys, lists, strings, numbers, booleans, null): {value!r}.",
            action=f"convert {what} to JSON-able values.",
        )
    return value


def serialize(metadata: CheckpointMetadata) -> bytes:
    """The bytes of a ``_metadata`` file (indented JSON, checksum included)."""
    return (json.dumps(metadata.model_dump(mode="json"), indent=2, sort_keys=True) + "\n").encode()


def deserialize(data: bytes, *, path: str, migrations: Mapping[int, Migration] | None = None) -> CheckpointMetadata:
    """Parse, verify and upgrade ``_metadata`` bytes read from ``path``."""
    document = _parse(data, path)
    _verify_checksum(document, path)
    upgraded = upgrade(document, path=path, migrations=MIGRATIONS if migrations is None else migrations)
    if upgraded is not document:
        upgraded["checksum"] = content_checksum(upgraded)
    try:
        return CheckpointMetadata.model_validate(upgraded)
    except ValidationError as exc:
        raise _corrupt(path, f"it does not match format version {FORMAT_VERSION}: {exc}") from exc


def upgrade(
    document: dict[str, Any], *, path: str, migrations: Mapping[int, Migration], target: int = FORMAT_VERSION
) -> dict[str, Any]:
    """Apply the migration chain from the document's version to ``target``."""
    version = document.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _corrupt(path, f"format_version is missing or not an integer ({version!r})")
    while version != target:
        step = migrations.get(version) if version < target else None
        if step is None:
            raise _no_upgrade_path(path, version, target)
        document = {**step(dict(document)), "format_version": version + 1}
        version += 1
    return document


def _parse(data: bytes, path: str) -> dict[str, Any]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _corrupt(path, f"it is not valid JSON (truncated or overwritten?): {exc}") from exc
    if not isinstance(document, dict):
        raise _corrupt(path, "it is not a JSON object")
    return document


def _verify_checksum(document: dict[str, Any], path: str) -> None:
    stored = document.get("checksum")
    if stored is None:  # ``{}``, or another JSON file written in its place: "stored None" said nothing
        keys = ", ".join(sorted(document)[:8]) or "none"
        raise _corrupt(path, f"it has no checksum, so it is not a checkpoint's metadata (its keys: {keys})")
    if stored != content_checksum(document):
        raise _corrupt(path, f"its checksum does not match its content (stored {stored!r})")


def _corrupt(path: str, why: str) -> CorruptMetadataError:
    return CorruptMetadataError(
        f"Checkpoint metadata {path} is corrupt: {why}.",
        action="restore from another checkpoint or savepoint (see `epochal checkpoints list`).",
        path=path,
    )


def _no_upgrade_path(path: str, version: int, target: int) -> UnsupportedMetadataVersion:
    newer = " (written by a newer epochal?)" if version > target else ""
    return UnsupportedMetadataVersion(
        f"Checkpoint metadata {path} has format version {version}{newer}: "
        f"no upgrade path to format version {target}.",
        action="restore it with an epochal version that reads this format, or use another checkpoint.",
        path=path,
        version=version,
        target=target,
    )
