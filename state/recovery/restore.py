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
redistributed on read by its mode (:func:`epochal.state.backends.operator.redistribute`); the
new parallelism is recorded in the result. Backends that opened tables before
the restore must be recreated (they cache what they opened).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from epochal.state.delta import io as delta_io
from epochal.state.checkpoint.coordinator import CheckpointCoordinator
from epochal.state.errors import (
    CheckpointNotFound,
    CheckpointStorageError,
    CorruptMetadataError,
    UnsupportedMetadataVersion,
)
from epochal.state.checkpoint.hooks import restore_hooks
from epochal.state.checkpoint.lineage import Lineage, describe
from epochal.state.checkpoint.metadata import CheckpointMetadata
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.storage import METADATA_FILE, CheckpointStorage, PointerKind
from epochal.state.delta.tables import create_table
from epochal.state.delta.log import DeltaLog, VersionSnapshot
from epochal.state.recovery.plan import PlannedState, RestoreOptions, RestorePlan, _existing_tables, plan_restore
from epochal.state.recovery.types import (
    CheckpointSource,
    RestoreAction,
    RestoredState,
    RestoreResult,
    SkippedCheckpoint,
    StateTarget,
)
from epochal.state.errors import (
    CheckpointNotRestorable,
    EpochalStateError,
    NoRestorableCheckpoint,
    RescaleError,
    RestoreFallbackWarning,
    SnapshotUnavailable,
)
from epochal.state.delta.paths import to_spark, to_url
from epochal.state.recovery.schema import conform_columns, same_columns
from epochal.state.checkpoint.snapshots import copied_properties
from epochal.state.fence import Fence, no_fence

log = logging.getLogger(__name__)

_LIST = "list checkpoints and savepoints with `epochal checkpoints list`"
# Problems that make the latest checkpoint unusable, so that an older one is tried.
FALLBACK_ERRORS = (
    SnapshotUnavailable, CorruptMetadataError, UnsupportedMetadataVersion, CheckpointNotFound, CheckpointStorageError,
)

__all__ = [
    "CheckpointSource", "RestoreAction", "RestoreResult", "RestoredState", "SkippedCheckpoint", "StateTarget",
    "check_pointer", "plan_restore", "reset_to_empty", "restore_state",
]


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


def _choose(
    catalog: _Catalog, pointer: str | int | None, options: RestoreOptions, max_epoch: int | None = None,
    checkpoints_first: bool = False,
) -> _Chosen | None:
    if pointer is None:
        return _choose_latest(catalog, options, max_epoch, checkpoints_first)
    return _choose_pointer(catalog, pointer, options)


def check_pointer(source: CheckpointCoordinator | CheckpointSource, pointer: str | int) -> None:
    """Refuse ``pointer`` as :func:`restore_state` would if it names nothing restorable (no such checkpoint or
    savepoint, never completed, released, its ``_metadata`` unreadable), reading only checkpoint storage: no
    Spark, nothing written. A caller asks it before taking the deployment's lease."""
    _resolve(_Catalog(source), pointer)


def _choose_pointer(catalog: _Catalog, pointer: str | int, options: RestoreOptions) -> _Chosen:
    durable, where, metadata = _resolve(catalog, pointer)
    try:
        return _Chosen(durable, plan_restore(metadata, where, options))
    except FALLBACK_ERRORS as exc:
        raise _not_restorable(pointer, where, exc) from exc


def _resolve(catalog: _Catalog, pointer: str | int) -> tuple[str, str, CheckpointMetadata]:
    """The pointer to record, the ``_metadata`` it leads to, and that metadata."""
    where = str(pointer)
    try:
        found = catalog.storage.resolve_pointer(pointer)
        where = found.metadata_path
        entry = catalog.resolver.resolve(pointer)
        if found.kind is PointerKind.CHECKPOINT_ID:
            where = entry.metadata_path
        metadata = catalog.read_metadata(where, entry.checkpoint_id)
    except FALLBACK_ERRORS as exc:
        raise _not_restorable(pointer, where, exc) from exc
    # The pointer recorded (progress.json: a restore that died is done again by the next run, from any folder)
    # and used from here on: an id as given, a path as the folder it led to (a relative path was the shell's).
    durable = str(pointer) if found.kind is PointerKind.CHECKPOINT_ID else found.metadata_path[: -len(METADATA_FILE) - 1]
    return durable, where, metadata


def _not_restorable(pointer: str | int, where: str, exc: EpochalStateError) -> CheckpointNotRestorable:
    what = f"Checkpoint {pointer}" if isinstance(pointer, int) or str(pointer).isdigit() else f"Savepoint {pointer!r}"
    at = "" if where == str(pointer) or where in exc.message else f" ({where})"  # the path said once
    return CheckpointNotRestorable(
        f"{what}{at} cannot be restored: {exc.message}",
        action=f"restore another checkpoint or a savepoint ({_LIST}); "
        "without a pointer the newest usable checkpoint is restored.",
        pointer=str(pointer), path=where,
    )


def _choose_latest(
    catalog: _Catalog, options: RestoreOptions, max_epoch: int | None = None, checkpoints_first: bool = False
) -> _Chosen | None:
    # Never one off the state's history (taken before a later restore rewound past it): see ``lineage``.
    retained, off = Lineage(catalog.storage).split(catalog.store.all(), "without a pointer")
    entries = sorted(
        (e for e in retained if max_epoch is None or int(e.metadata.epoch) <= max_epoch),
        key=lambda e: int(e.checkpoint_id), reverse=True,
    )
    if checkpoints_first:  # Flink's restart: the latest completed checkpoint; savepoints only when none is usable
        entries.sort(key=lambda e: e.is_savepoint)  # stable: each kind stays newest first
    if off and not retained:
        raise NoRestorableCheckpoint(
            f"The retained {', '.join(describe(e) for e in off)} {'is' if len(off) == 1 else 'are'} off "
            "the state's history (a later restore rewound past it and the epochs after that were run again), and "
            "no other is retained: refusing to pick one without being told.",
            action=f"restore one explicitly to go back to that history ({_LIST}).",
        )
    if retained and not entries:
        raise NoRestorableCheckpoint(
            f"No retained checkpoint or savepoint is of epoch {max_epoch} or before "
            f"(retained: {sorted(int(e.metadata.epoch) for e in retained)}): refusing to restore a later epoch.",
            action=f"restore one explicitly ({_LIST}).",
        )
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


def _apply(spark: Any, plan: RestorePlan, parallelism: int | None, fence: Fence) -> list[RestoredState]:
    restored = []
    for item in plan.states:
        fence(f"restore state {item.handle.key}")
        restored.append(_apply_state(spark, item, parallelism))
    return restored + _empty_tables(spark, plan.to_empty, fence)


def _empty_tables(spark: Any, tables: Iterable[tuple[str, str, str]], fence: Fence, *, empty_start: bool = False) -> list[RestoredState]:
    """Empty each table; ``empty_start``: no checkpoint is restored at all (said at info level, not as a warning)."""
    restored = []
    for stage, state, url in tables:
        fence(f"empty state {stage}/{state}")
        restored.append(_empty_table(spark, stage, state, url, empty_start=empty_start))
    return restored


def _apply_state(spark: Any, item: PlannedState, parallelism: int | None) -> RestoredState:
    from epochal.state.delta.restore import restore_to_version

    handle = item.handle
    if item.same_table and not item.migrate:
        if _holds_snapshot(item.working_url, item.snapshot):
            action = RestoreAction.UNCHANGED
        else:
            restore_to_version(spark, item.working_url, handle.version)
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
    # A working table: the state tables' own properties (deletion vectors on), whatever the
    # source (a canonical copy of a savepoint or full checkpoint has them off).
    properties = {**copied_properties(item.snapshot.configuration), **delta_io.state_table_properties(spark)}
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


def _empty_table(spark: Any, stage: str, state: str, table_url: str, *, empty_start: bool = False) -> RestoredState:
    """Delete every row (state the checkpoint does not hold starts empty); history is kept."""
    from delta.tables import DeltaTable

    if empty_start:  # the usual start over after a first run that died or failed: nothing unexpected
        log.info("state %s/%s starts empty: emptying its working table %s", stage, state, table_url)
    else:
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
    max_epoch: int | None = None,
    checkpoints_first: bool = False,
    before_changes: Callable[[str | None], None] | None = None,
    fence: Fence = no_fence,
) -> RestoreResult:
    """Restore the working state tables from a checkpoint or savepoint (see the module docstring).

    ``pointer``: None (the newest usable retained checkpoint, with fallback), a
    checkpoint id, a ``chk-<id>`` folder, or a savepoint folder or name.
    ``targets``: the states the current code declares (schema checks and
    migration, max parallelism); without them every handle is restored to
    ``<working_root>/<stage>/<state>`` (default ``<checkpoints>/shared``).
    ``parallelism``: the parallelism the pipeline will run with (rescale).
    ``max_epoch``: without a pointer, only checkpoints of this epoch or before.
    ``checkpoints_first``: without a pointer, the latest completed checkpoint even
    where a savepoint is newer (the newest savepoint only if no checkpoint is
    retained or usable); without it the newest of either (a crash's recovery:
    where the state was).
    ``before_changes``: called once the checkpoint is chosen and checked, before
    anything changes, with the chosen pointer (None: empty state), so that a
    caller can record the restore and redo it after a crash.
    ``fence`` (:mod:`epochal.state.fence`): called before each table is changed.
    """
    if parallelism is not None and parallelism < 1:
        raise RescaleError(f"Parallelism must be at least 1, not {parallelism}.", parallelism=parallelism)
    catalog = _Catalog(source)
    options = _options(catalog, targets, working_root, parallelism, allow_non_restored_state)
    chosen = _choose(catalog, pointer, options, max_epoch, checkpoints_first)
    if before_changes is not None:
        before_changes(None if chosen is None else chosen.pointer)
    if chosen is None:
        return _start_empty(spark, options, parallelism, fence)
    _run_hooks(catalog, chosen, allow_non_restored_state)
    states = _apply(spark, chosen.plan, parallelism, fence)
    metadata = chosen.plan.metadata
    log.info("restored checkpoint %s (epoch %s) from %s", metadata.checkpoint_id, metadata.epoch, chosen.plan.metadata_path)
    return RestoreResult(
        checkpoint_id=metadata.checkpoint_id, epoch=metadata.epoch, kind=metadata.kind,
        metadata_path=chosen.plan.metadata_path, source_positions=dict(metadata.source_positions),
        parallelism=parallelism, states=tuple(states), skipped=chosen.skipped, not_restored=chosen.plan.not_restored,
        sinks=metadata.sinks,
    )


def _options(
    catalog: _Catalog, targets: Iterable[StateTarget] | None, working_root: str | None, parallelism: int | None,
    allow: bool,
) -> RestoreOptions:
    by_key = None if targets is None else {t.key: t for t in targets}
    root = to_url(working_root) if working_root is not None else to_url(catalog.storage.shared_url)
    return RestoreOptions(by_key, root, parallelism, allow)


def _start_empty(spark: Any, options: RestoreOptions, parallelism: int | None, fence: Fence) -> RestoreResult:
    """Nothing was ever completed: every existing working table is emptied (a crashed first run's writes)."""
    log.info("no checkpoint was ever completed: starting from empty state")
    states = _empty_tables(spark, _existing_tables(options), fence, empty_start=True)
    return RestoreResult(checkpoint_id=None, epoch=None, parallelism=parallelism, states=tuple(states))


def reset_to_empty(
    spark: Any, storage: CheckpointStorage, *, targets: Iterable[StateTarget] | None = None,
    working_root: str | None = None, fence: Fence = no_fence,
) -> RestoreResult:
    """Empty every working table (the targets', or all under the working root), keeping their history.

    For a backfill from the first partition. Unlike deleting the table folders,
    this keeps every version retained checkpoints reference, so they stay
    restorable and retention keeps working.
    """
    by_key = None if targets is None else {t.key: t for t in targets}
    root = to_url(working_root) if working_root is not None else to_url(storage.shared_url)
    return _start_empty(spark, RestoreOptions(by_key, root), None, fence)
