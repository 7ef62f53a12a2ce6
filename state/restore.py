"""Restore: bring the working state tables back to a completed checkpoint or a savepoint.

``restore_state`` runs in named steps::

    _choose          which checkpoint: the pointer's, or the newest usable retained one
    plan_restore     check every handle BEFORE anything changes (pure reads, no Spark job)
    _run_hooks       the coordinator's restore path (MasterTriggerRestoreHook)
    _apply           each working table brought to its snapshot; state the checkpoint
                     does not hold is emptied

Choosing. Without a pointer the newest retained checkpoint (or savepoint) is
tried first; one whose ``_metadata`` is missing or corrupt, or whose table,
version or data files are gone, is SKIPPED with a :class:`RestoreFallbackWarning`
(and a log warning) naming it, and the next older one is tried. If none is
usable that is :class:`NoRestorableCheckpoint`; starting empty is only right
when nothing was ever completed. With a pointer (an id, a ``chk-<id>`` folder,
a savepoint folder or name) any problem is :class:`CheckpointNotRestorable`
naming it: no fallback. A checkpoint that is usable but does not fit the
current code (schema, max parallelism, unclaimed state) is an error in both
cases: an older checkpoint would not fit either.

Checking a handle: its table exists, the Delta log covers its version, every
data and deletion-vector file of that version exists, and the table's schema
at that version is the handle's. With state targets (the current descriptors)
the stored schema must be identical to the declared one, or migratable (only
nullable fields added: the restored table is rewritten with them null), else
:class:`StateMigrationError` names the state and the column.

Applying, per state:

* the handle names the working table itself (incremental checkpoints): Delta
  ``RESTORE`` to its version, a metadata-only commit. The snapshot's files are
  never modified (Flink's NO_CLAIM), so the checkpoint stays restorable;
* the handle names a copy (full checkpoints, savepoints, another deployment's
  checkpoint) or the schema must be migrated: the working table is overwritten
  with the snapshot (created if missing), keeping its history, so older
  retained checkpoints remain restorable.

Rescale: keyed state needs no data movement (rows carry their key group; the
maximum parallelism recorded must equal the current one). Operator state is
redistributed on read by its mode (:func:`state.operator.redistribute`); the
new parallelism is recorded in the result. Backends that opened tables before
the restore must be recreated (they cache what they opened).
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict
from pyspark.sql import types as T

from state import delta_io
from state.checkpoint.coordinator import CheckpointCoordinator
from state.checkpoint.errors import (
    CheckpointNotFound,
    CheckpointStorageError,
    CorruptMetadataError,
    UnsupportedMetadataVersion,
)
from state.checkpoint.hooks import MasterTriggerRestoreHook, restore_hooks
from state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from state.checkpoint.resolve import CheckpointResolver
from state.checkpoint.storage import CheckpointStorage, PointerKind, validate_name
from state.checkpoint.store import CompletedCheckpointStore
from state.descriptors import KeyedStateDescriptor, OperatorStateDescriptor, OperatorStateMode
from state.errors import MaxParallelismMismatch
from state.handles import StateHandle, StateKind
from state.keyed import (
    PROP_KEY_TYPE,
    PROP_MAX_PARALLELISM,
    PROP_STATE_TYPE,
    PROP_VALUE_TYPE,
    KeyedStateBackend,
    create_table,
    keyed_table_schema,
)
from state.lifecycle.deltalog import DeltaLog, VersionSnapshot, working_tables
from state.lifecycle.errors import (
    CheckpointNotRestorable,
    NoRestorableCheckpoint,
    RescaleError,
    RestoreFallbackWarning,
    SnapshotUnavailable,
    StateMigrationError,
    UnclaimedStateError,
)
from state.lifecycle.paths import join_url, resolve_table_url, same_location, to_spark, to_url
from state.lifecycle.schema import SchemaComparison, SchemaVerdict, compare_schemas, conform_columns, same_columns
from state.operator import PROP_MODE, OperatorStateBackend, operator_table_schema
from state.snapshots import copied_properties

log = logging.getLogger(__name__)

_LIST = "list checkpoints and savepoints with `epochal checkpoints list`"
# Problems that make the latest checkpoint unusable, so that an older one is tried.
FALLBACK_ERRORS = (
    SnapshotUnavailable, CorruptMetadataError, UnsupportedMetadataVersion, CheckpointNotFound, CheckpointStorageError,
)

__all__ = [
    "CheckpointSource", "RestoreAction", "RestoreResult", "RestoredState", "SkippedCheckpoint", "StateTarget",
    "plan_restore", "reset_to_empty", "restore_state",
]


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class StateTarget:
    """One state as the current code declares it, and the working table it lives in."""

    stage: str
    descriptor: KeyedStateDescriptor | OperatorStateDescriptor
    working_path: str
    max_parallelism: int | None = None  # keyed state only

    @classmethod
    def keyed(cls, backend: KeyedStateBackend, descriptor: KeyedStateDescriptor) -> StateTarget:
        return cls(backend.stage, descriptor, backend.table_path(descriptor), backend.max_parallelism)

    @classmethod
    def operator(cls, backend: OperatorStateBackend, descriptor: OperatorStateDescriptor) -> StateTarget:
        return cls(backend.stage, descriptor, backend.table_path(descriptor))

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.descriptor.name}"

    @property
    def is_keyed(self) -> bool:
        return isinstance(self.descriptor, KeyedStateDescriptor)

    def declared_schema(self) -> T.StructType:
        if isinstance(self.descriptor, KeyedStateDescriptor):
            return keyed_table_schema(self.descriptor)
        return operator_table_schema(self.descriptor)

    def declared_properties(self) -> dict[str, str]:
        """The ``epochal.*`` properties the state backends check when they open the table."""
        d = self.descriptor
        if isinstance(d, KeyedStateDescriptor):
            props = {PROP_STATE_TYPE: d.state_type.value, PROP_VALUE_TYPE: d.stored_type.json(), PROP_KEY_TYPE: d.key_type.json()}
            if self.max_parallelism is not None:
                props[PROP_MAX_PARALLELISM] = str(self.max_parallelism)
            return props
        return {PROP_MODE: d.mode.value, PROP_VALUE_TYPE: d.value_type.json()}

    def check_kind(self, handle: StateHandle) -> None:
        """The snapshot must be the same kind of state (keyed value/list/..., or operator mode)."""
        d = self.descriptor
        if isinstance(d, KeyedStateDescriptor):
            expected_kind, expected_type = StateKind.KEYED, d.state_type.value
        else:
            broadcast = d.mode is OperatorStateMode.BROADCAST
            expected_kind, expected_type = (StateKind.BROADCAST if broadcast else StateKind.OPERATOR), d.mode.value
        if handle.kind is not expected_kind or handle.state_type != expected_type:
            raise StateMigrationError(
                f"State {self.key} was checkpointed as {handle.kind.value} {handle.state_type} state; "
                f"the current descriptor declares {expected_kind.value} {expected_type} state.",
                action="keep the state's type, or give the new state another name "
                "(the old one is then dropped with allow_non_restored_state=True).",
                state=self.key,
            )


@dataclass(frozen=True)
class CheckpointSource:
    """Where checkpoints are found when no coordinator is at hand (tools, tests)."""

    storage: CheckpointStorage
    store: CompletedCheckpointStore
    hooks: Sequence[MasterTriggerRestoreHook] = ()


# ---------------------------------------------------------------------------- results


class RestoreAction(str, Enum):
    UNCHANGED = "unchanged"  # the working table already was at the snapshot's version
    DELTA_RESTORE = "delta_restore"  # Delta RESTORE of the working table to the snapshot's version
    COPY = "copy"  # the working table overwritten with the snapshot (a copy, or a schema migration)
    EMPTIED = "emptied"  # the checkpoint holds no such state: the working table was emptied


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RestoredState(_Frozen):
    stage: str
    state: str
    action: RestoreAction
    working_path: str
    working_version: int | None = None  # the working table's version after the restore
    kind: StateKind | None = None
    source_path: str | None = None
    source_version: int | None = None
    rows: int | None = None
    migrated_columns: tuple[str, ...] = ()
    parallelism_before: int | None = None
    parallelism_after: int | None = None

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.state}"


class SkippedCheckpoint(_Frozen):
    checkpoint_id: int
    metadata_path: str
    reason: str


class RestoreResult(_Frozen):
    """What a restore did: which checkpoint, its position, each state, the fallbacks taken."""

    checkpoint_id: int | None
    epoch: int | None
    kind: CheckpointKind | None = None
    metadata_path: str | None = None
    source_positions: dict[str, Any] = {}
    parallelism: int | None = None
    states: tuple[RestoredState, ...] = ()
    skipped: tuple[SkippedCheckpoint, ...] = ()
    not_restored: tuple[str, ...] = ()  # states in the checkpoint that no target claimed

    @property
    def started_empty(self) -> bool:
        return self.checkpoint_id is None

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)

    def state(self, stage: str, state: str) -> RestoredState | None:
        return next((s for s in self.states if s.stage == stage and s.state == state), None)


# ------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class RestoreOptions:
    targets: Mapping[str, StateTarget] | None
    working_root: str  # URL
    parallelism: int | None = None
    allow_non_restored_state: bool = False


@dataclass(frozen=True)
class PlannedState:
    handle: StateHandle
    source_url: str
    snapshot: VersionSnapshot
    working_url: str
    target: StateTarget | None
    schema: SchemaComparison | None

    @property
    def same_table(self) -> bool:
        return same_location(self.source_url, self.working_url)

    @property
    def migrate(self) -> bool:
        return self.schema is not None and self.schema.needs_migration


@dataclass(frozen=True)
class RestorePlan:
    """A checked checkpoint: every state's snapshot verified, the tables to empty listed."""

    metadata: CheckpointMetadata
    metadata_path: str
    states: tuple[PlannedState, ...]
    to_empty: tuple[tuple[str, str, str], ...]  # stage, state, working table URL
    not_restored: tuple[str, ...]


def plan_restore(metadata: CheckpointMetadata, metadata_path: str, options: RestoreOptions) -> RestorePlan:
    """Check every handle of a checkpoint against storage and the targets; change nothing."""
    states: list[PlannedState] = []
    not_restored: list[str] = []
    for handle in metadata.handles:
        target = None if options.targets is None else options.targets.get(handle.key)
        if options.targets is not None and target is None:
            if not options.allow_non_restored_state:
                raise _unclaimed(metadata, handle)
            not_restored.append(handle.key)
            continue
        states.append(_plan_state(handle, metadata, metadata_path, target, options))
    keys = {h.key for h in metadata.handles}
    to_empty = tuple(t for t in _existing_tables(options) if f"{t[0]}/{t[1]}" not in keys)
    return RestorePlan(metadata, metadata_path, tuple(states), to_empty, tuple(not_restored))


def _plan_state(
    handle: StateHandle, metadata: CheckpointMetadata, metadata_path: str, target: StateTarget | None,
    options: RestoreOptions,
) -> PlannedState:
    source_url = resolve_table_url(handle, metadata_path)
    snapshot = verified_snapshot(handle, source_url)
    comparison = None
    if target is not None:
        target.check_kind(handle)
        comparison = compare_schemas(snapshot.schema, target.declared_schema())
        if comparison.verdict is SchemaVerdict.INCOMPATIBLE:
            raise _incompatible(metadata, target, comparison)
    _check_rescale(handle, snapshot, metadata, target, options.parallelism)
    if target is not None:
        working_url = to_url(target.working_path)
    else:
        stage, state = validate_name(handle.stage, what="stage name"), validate_name(handle.state, what="state name")
        working_url = join_url(options.working_root, f"{stage}/{state}")
    return PlannedState(handle, source_url, snapshot, working_url, target, comparison)


def verified_snapshot(handle: StateHandle, table_url: str) -> VersionSnapshot:
    """The snapshot a handle names, after checking its table, version, files and schema exist as recorded."""
    table = DeltaLog(table_url)
    if not table.exists():
        raise _unavailable(handle, table_url, f"there is no Delta table at {table_url}")
    try:
        snapshot = table.snapshot(handle.version)
    except SnapshotUnavailable as exc:
        raise _unavailable(handle, table_url, exc.message) from exc
    missing = table.missing_files(snapshot)
    if missing:
        raise _unavailable(
            handle, table_url,
            f"{len(missing)} file(s) of version {handle.version} of {table_url} are missing (first: {missing[0]})",
        )
    recorded = T.StructType.fromJson(json.loads(handle.schema_json))
    if not same_columns(snapshot.schema, recorded):
        raise _unavailable(
            handle, table_url,
            f"version {handle.version} of {table_url} has the schema {snapshot.schema.simpleString()}, "
            f"the handle recorded {recorded.simpleString()} (the table was replaced after the checkpoint)",
        )
    return snapshot


def _check_rescale(
    handle: StateHandle, snapshot: VersionSnapshot, metadata: CheckpointMetadata, target: StateTarget | None,
    parallelism: int | None,
) -> None:
    if handle.kind is not StateKind.KEYED:
        return
    recorded_prop = snapshot.configuration.get(PROP_MAX_PARALLELISM)
    recorded = handle.max_parallelism or (int(recorded_prop) if recorded_prop else None) or metadata.max_parallelism
    current = target.max_parallelism if target is not None else None
    if recorded is not None and current is not None and recorded != current:
        raise MaxParallelismMismatch(
            f"State {handle.key} in checkpoint {metadata.checkpoint_id} was written with max parallelism {recorded}; "
            f"the pipeline now uses {current}.",
            action=f"set the max parallelism back to {recorded} (it fixes the key groups of keyed state); "
            "to change it, rewrite the state into a new savepoint (State Processor API).",
            state=handle.key, checkpoint_id=metadata.checkpoint_id,
        )
    limit = current or recorded
    if parallelism is not None and limit is not None and parallelism > limit:
        raise RescaleError(
            f"Parallelism {parallelism} is above the max parallelism {limit} of keyed state {handle.key}: "
            "some subtasks would own no key group.",
            action=f"restore with a parallelism of at most {limit}.",
            state=handle.key, parallelism=parallelism, max_parallelism=limit,
        )


def _existing_tables(options: RestoreOptions) -> list[tuple[str, str, str]]:
    """Working tables that exist now: the targets', or every table under the working root."""
    if options.targets is None:
        return working_tables(options.working_root)
    found = []
    for target in options.targets.values():
        url = to_url(target.working_path)
        if DeltaLog(url).exists():
            found.append((target.stage, target.descriptor.name, url))
    return found


def _unavailable(handle: StateHandle, table_url: str, why: str) -> SnapshotUnavailable:
    return SnapshotUnavailable(
        f"State {handle.key} (version {handle.version}) cannot be read: {why}.",
        action="restore from another checkpoint or savepoint.",
        state=handle.key, path=table_url, version=handle.version,
    )


def _unclaimed(metadata: CheckpointMetadata, handle: StateHandle) -> UnclaimedStateError:
    return UnclaimedStateError(
        f"Checkpoint {metadata.checkpoint_id} holds state {handle.key} that no current state descriptor claims.",
        action="declare that state again, or restore with allow_non_restored_state=True to drop it.",
        state=handle.key, checkpoint_id=metadata.checkpoint_id,
    )


def _incompatible(metadata: CheckpointMetadata, target: StateTarget, comparison: SchemaComparison) -> StateMigrationError:
    return StateMigrationError(
        f"State {target.key} in checkpoint {metadata.checkpoint_id} cannot be migrated to its current descriptor: "
        f"column {comparison.column} {comparison.problem}.",
        action="only nullable fields may be added to a state's schema; restore with the previous descriptor, "
        "or give the changed state a new name (its old state is then dropped with allow_non_restored_state=True), "
        "or rewrite the state into a new savepoint (State Processor API).",
        state=target.key, column=comparison.column, checkpoint_id=metadata.checkpoint_id,
    )


# ----------------------------------------------------------------------------- choose


class _Catalog:
    """The storage, the store and the restore hooks, from a coordinator or a CheckpointSource."""

    def __init__(self, source: CheckpointCoordinator | CheckpointSource) -> None:
        self.storage, self.store = source.storage, source.store
        self.coordinator = source if isinstance(source, CheckpointCoordinator) else None
        self.hooks = () if self.coordinator is not None else tuple(source.hooks)  # type: ignore[union-attr]
        self.resolver = CheckpointResolver(self.storage, self.store)

    def read_metadata(self, metadata_path: str, expected_id: int | None) -> CheckpointMetadata:
        metadata = self.resolver.read_metadata(metadata_path)
        if expected_id is not None and metadata.checkpoint_id != expected_id:
            raise CorruptMetadataError(
                f"Checkpoint metadata {metadata_path} holds checkpoint {metadata.checkpoint_id}, not {expected_id}.",
                action=f"restore from another checkpoint or savepoint ({_LIST}).", path=metadata_path,
            )
        return metadata

    def anything_completed(self) -> bool:
        """True if some checkpoint was ever committed (retained, awaiting release, or with a folder)."""
        if self.store.all() or self.store.awaiting_release():
            return True
        return any(self.store.get(cid) is not None for cid, _ in self.storage.list_checkpoint_dirs())


@dataclass(frozen=True)
class _Chosen:
    pointer: str
    plan: RestorePlan
    skipped: tuple[SkippedCheckpoint, ...] = ()


def _choose(catalog: _Catalog, pointer: str | int | None, options: RestoreOptions) -> _Chosen | None:
    if pointer is None:
        return _choose_latest(catalog, options)
    return _choose_pointer(catalog, pointer, options)


def _choose_pointer(catalog: _Catalog, pointer: str | int, options: RestoreOptions) -> _Chosen:
    where = str(pointer)
    try:
        found = catalog.storage.resolve_pointer(pointer)
        where = found.metadata_path
        entry = catalog.resolver.resolve(pointer)
        if found.kind is PointerKind.CHECKPOINT_ID:
            where = entry.metadata_path
        metadata = catalog.read_metadata(where, entry.checkpoint_id)
        return _Chosen(str(pointer), plan_restore(metadata, where, options))
    except FALLBACK_ERRORS as exc:
        raise CheckpointNotRestorable(
            f"Checkpoint {pointer!r} ({where}) cannot be restored: {exc.message}",
            action=f"restore another checkpoint or a savepoint ({_LIST}); "
            "without a pointer the newest usable checkpoint is restored.",
            pointer=str(pointer), path=where,
        ) from exc


def _choose_latest(catalog: _Catalog, options: RestoreOptions) -> _Chosen | None:
    entries = sorted(catalog.store.all(), key=lambda e: int(e.checkpoint_id), reverse=True)
    if not entries:
        if catalog.anything_completed():
            raise NoRestorableCheckpoint(
                "Checkpoints were completed but none is retained: refusing to start from empty state.",
                action=f"restore a savepoint ({_LIST}).",
            )
        return None
    skipped: list[SkippedCheckpoint] = []
    for entry in entries:
        try:
            metadata = catalog.read_metadata(entry.metadata_path, entry.checkpoint_id)
            plan = plan_restore(metadata, entry.metadata_path, options)
        except FALLBACK_ERRORS as exc:
            skipped.append(_skip(entry.checkpoint_id, entry.metadata_path, exc.message))
            continue
        return _Chosen(str(int(entry.checkpoint_id)), plan, tuple(skipped))
    reasons = "; ".join(f"checkpoint {s.checkpoint_id}: {s.reason}" for s in skipped)
    raise NoRestorableCheckpoint(
        f"None of the {len(entries)} retained checkpoints can be restored ({reasons}).",
        action=f"restore a savepoint, or repair the storage ({_LIST}); the state is NOT reset to empty.",
        skipped=[s.checkpoint_id for s in skipped],
    )


def _skip(checkpoint_id: int, metadata_path: str, reason: str) -> SkippedCheckpoint:
    message = f"Skipping checkpoint {checkpoint_id} ({metadata_path}): {reason} Trying an older checkpoint."
    warnings.warn(message, RestoreFallbackWarning, stacklevel=5)  # the caller of restore_state
    log.warning(message)
    return SkippedCheckpoint(checkpoint_id=int(checkpoint_id), metadata_path=metadata_path, reason=reason)


# ------------------------------------------------------------------------------ apply


def _run_hooks(catalog: _Catalog, chosen: _Chosen, allow_non_restored_state: bool) -> None:
    """The coordinator's restore path (master hooks), or the hooks of a CheckpointSource."""
    metadata = chosen.plan.metadata
    if catalog.coordinator is not None:
        catalog.coordinator.restore(chosen.pointer, allow_non_restored_state=allow_non_restored_state)
    else:
        restore_hooks(catalog.hooks, metadata.id, metadata.hook_states, allow_non_restored_state=allow_non_restored_state)


def _apply(spark: Any, plan: RestorePlan, parallelism: int | None) -> list[RestoredState]:
    restored = [_apply_state(spark, item, parallelism) for item in plan.states]
    restored += [_empty_table(spark, stage, state, url) for stage, state, url in plan.to_empty]
    return restored


def _apply_state(spark: Any, item: PlannedState, parallelism: int | None) -> RestoredState:
    from delta.tables import DeltaTable

    handle = item.handle
    if item.same_table and not item.migrate:
        if _holds_snapshot(item.working_url, item.snapshot):
            action = RestoreAction.UNCHANGED
        else:
            DeltaTable.forPath(spark, to_spark(item.working_url)).restoreToVersion(handle.version)
            action = RestoreAction.DELTA_RESTORE
    else:
        _overwrite_with_snapshot(spark, item)
        action = RestoreAction.COPY
    return RestoredState(
        stage=handle.stage, state=handle.state, action=action, working_path=to_spark(item.working_url),
        working_version=DeltaLog(item.working_url).latest_version(), kind=handle.kind,
        source_path=to_spark(item.source_url), source_version=handle.version, rows=handle.rows,
        migrated_columns=item.schema.added if item.migrate and item.schema is not None else (),
        parallelism_before=handle.parallelism,
        parallelism_after=parallelism if parallelism is not None else handle.parallelism,
    )


def _holds_snapshot(table_url: str, snapshot: VersionSnapshot) -> bool:
    """True if the table's current version has exactly the snapshot's files, schema and properties."""
    table = DeltaLog(table_url)
    current = table.snapshot(_latest(table))
    return (current.files, current.schema_json, dict(current.configuration)) == (
        snapshot.files, snapshot.schema_json, dict(snapshot.configuration)
    )


def _overwrite_with_snapshot(spark: Any, item: PlannedState) -> None:
    """Write the snapshot (migrated to the declared schema if needed) over the working table."""
    declared = item.target.declared_schema() if item.target is not None else item.snapshot.schema
    data = delta_io.read_version(spark, to_spark(item.source_url), item.snapshot.version)
    if item.migrate:
        data = data.select(*conform_columns(item.snapshot.schema, declared))
    properties = copied_properties(item.snapshot.configuration)
    if item.target is not None:
        properties.update(item.target.declared_properties())
    overwrite_table(spark, item.working_url, declared, properties, data, rows=item.handle.rows)


def overwrite_table(
    spark: Any, table_url: str, schema: T.StructType, properties: Mapping[str, str], data: Any, *, rows: int | None
) -> None:
    """Make the table at ``table_url`` hold exactly ``data`` with ``schema`` and ``properties``.

    A missing table is created with the exact schema (NOT NULL kept). An
    existing one is overwritten in one commit, keeping its history (older
    retained checkpoints may reference its versions). When its schema differs
    (a migration), Delta's ``overwriteSchema`` makes every column nullable and
    Delta refuses to set NOT NULL back; that is harmless: schema comparisons
    ignore nullability and the state backends never write nulls there.
    """
    path = to_spark(table_url)
    table = DeltaLog(table_url)
    if not table.exists():
        create_table(spark, path, schema, dict(properties))
        if rows != 0:
            data.write.format("delta").mode("append").save(path)
        return
    current = table.snapshot(_latest(table))
    writer = data.write.format("delta").mode("overwrite")
    if same_columns(current.schema, schema):
        writer.save(path)
    else:
        writer.option("overwriteSchema", "true").save(path)
    _set_properties(spark, path, properties, current.configuration)


def _latest(table: DeltaLog) -> int:
    latest = table.latest_version()
    if latest is None:
        raise SnapshotUnavailable(f"No Delta table at {table.url}.", path=table.url)
    return latest


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _set_properties(spark: Any, path: str, wanted: Mapping[str, str], current: Mapping[str, str]) -> None:
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        pairs = ", ".join(f"{_sql_string(k)} = {_sql_string(v)}" for k, v in sorted(changed.items()))
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({pairs})")
    stale = [k for k in current if k.startswith("epochal.") and k not in wanted]
    if stale:
        keys = ", ".join(_sql_string(k) for k in sorted(stale))
        spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES IF EXISTS ({keys})")


def _empty_table(spark: Any, stage: str, state: str, table_url: str) -> RestoredState:
    """Delete every row (state the checkpoint does not hold starts empty); history is kept."""
    from delta.tables import DeltaTable

    log.warning("state %s/%s is not in the restored checkpoint: emptying its working table %s", stage, state, table_url)
    DeltaTable.forPath(spark, to_spark(table_url)).delete()
    return RestoredState(
        stage=stage, state=state, action=RestoreAction.EMPTIED, working_path=to_spark(table_url),
        working_version=DeltaLog(table_url).latest_version(), rows=0,
    )


# ---------------------------------------------------------------------------- restore


def restore_state(
    spark: Any,
    source: CheckpointCoordinator | CheckpointSource,
    pointer: str | int | None = None,
    *,
    targets: Iterable[StateTarget] | None = None,
    working_root: str | None = None,
    parallelism: int | None = None,
    allow_non_restored_state: bool = False,
) -> RestoreResult:
    """Restore the working state tables from a checkpoint or savepoint (see the module docstring).

    ``pointer``: None (the newest usable retained checkpoint, with fallback), a
    checkpoint id, a ``chk-<id>`` folder, or a savepoint folder or name.
    ``targets``: the states the current code declares (schema checks and
    migration, max parallelism); without them every handle is restored to
    ``<working_root>/<stage>/<state>`` (default ``<checkpoints>/shared``).
    ``parallelism``: the parallelism the pipeline will run with (rescale).
    """
    if parallelism is not None and parallelism < 1:
        raise RescaleError(f"Parallelism must be at least 1, not {parallelism}.", parallelism=parallelism)
    catalog = _Catalog(source)
    options = _options(catalog, targets, working_root, parallelism, allow_non_restored_state)
    chosen = _choose(catalog, pointer, options)
    if chosen is None:
        return _start_empty(spark, options, parallelism)
    _run_hooks(catalog, chosen, allow_non_restored_state)
    states = _apply(spark, chosen.plan, parallelism)
    metadata = chosen.plan.metadata
    log.info("restored checkpoint %s (epoch %s) from %s", metadata.checkpoint_id, metadata.epoch, chosen.plan.metadata_path)
    return RestoreResult(
        checkpoint_id=metadata.checkpoint_id, epoch=metadata.epoch, kind=metadata.kind,
        metadata_path=chosen.plan.metadata_path, source_positions=dict(metadata.source_positions),
        parallelism=parallelism, states=tuple(states), skipped=chosen.skipped, not_restored=chosen.plan.not_restored,
    )


def _options(
    catalog: _Catalog, targets: Iterable[StateTarget] | None, working_root: str | None, parallelism: int | None,
    allow: bool,
) -> RestoreOptions:
    by_key = None if targets is None else {t.key: t for t in targets}
    root = to_url(working_root) if working_root is not None else to_url(catalog.storage.child("shared"))
    return RestoreOptions(by_key, root, parallelism, allow)


def _start_empty(spark: Any, options: RestoreOptions, parallelism: int | None) -> RestoreResult:
    """Nothing was ever completed: every existing working table is emptied (a crashed first run's writes)."""
    log.info("no checkpoint was ever completed: starting from empty state")
    states = [_empty_table(spark, stage, state, url) for stage, state, url in _existing_tables(options)]
    return RestoreResult(checkpoint_id=None, epoch=None, parallelism=parallelism, states=tuple(states))


def reset_to_empty(
    spark: Any, storage: CheckpointStorage, *, targets: Iterable[StateTarget] | None = None,
    working_root: str | None = None,
) -> RestoreResult:
    """Empty every working table (the targets', or all under the working root), keeping their history.

    For a backfill from the first partition. Unlike deleting the table folders,
    this keeps every version retained checkpoints reference, so they stay
    restorable and retention keeps working.
    """
    by_key = None if targets is None else {t.key: t for t in targets}
    root = to_url(working_root) if working_root is not None else to_url(storage.child("shared"))
    return _start_empty(spark, RestoreOptions(by_key, root), None)
