"""Planning a restore: every handle checked against storage and the declared states before anything changes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pyspark.sql import types as T
from epochal.state.checkpoint.metadata import CheckpointMetadata
from epochal.state.checkpoint.storage import validate_name
from epochal.state.errors import MaxParallelismMismatch
from epochal.state.handles import StateHandle, StateKind
from epochal.state.backends.keyed_table import PROP_MAX_PARALLELISM
from epochal.state.delta.log import DeltaLog, VersionSnapshot, working_tables
from epochal.state.errors import RescaleError, SnapshotUnavailable, StateMigrationError, UnclaimedStateError
from epochal.state.delta.paths import join_url, resolve_table_url, same_location, to_url
from epochal.state.recovery.schema import SchemaComparison, SchemaVerdict, compare_schemas, same_columns
from epochal.state.recovery.types import StateTarget




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
    if options.targets is not None and not options.allow_non_restored_state:
        if unclaimed := [h for h in metadata.handles if h.key not in options.targets]:
            raise _unclaimed(metadata, unclaimed)
    for handle in metadata.handles:
        target = None if options.targets is None else options.targets.get(handle.key)
        if options.targets is not None and target is None:
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
            f"State {handle.key} in {_named(metadata)} was written with max parallelism {recorded}; "
            f"the pipeline now uses {current}.",
            action=f"set the max parallelism back to {recorded} (it fixes the key groups of keyed state, as in Flink); "
            "a pipeline with another one starts from empty state (another checkpoints.dir and warehouse).",
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


def _named(metadata: CheckpointMetadata) -> str:
    """``checkpoint 3``, or ``savepoint 3 (before)``: what the user restores, as they know it."""
    if metadata.savepoint_name is not None:
        return f"savepoint {metadata.checkpoint_id} ({metadata.savepoint_name})"
    return f"checkpoint {metadata.checkpoint_id}"


def _unclaimed(metadata: CheckpointMetadata, handles: list[StateHandle]) -> UnclaimedStateError:
    keys = [h.key for h in handles]
    named = _named(metadata)
    return UnclaimedStateError(
        f"{named[0].upper()}{named[1:]} holds state {', '.join(keys)} that no current state descriptor claims.",
        action=f"declare {'that state' if len(keys) == 1 else 'those states'} again, or restore with "
        f"--allow-non-restored-state (allow_non_restored_state=True) to drop {'it' if len(keys) == 1 else 'them'}.",
        state=keys[0], states=keys, checkpoint_id=metadata.checkpoint_id,
    )


def _incompatible(metadata: CheckpointMetadata, target: StateTarget, comparison: SchemaComparison) -> StateMigrationError:
    return StateMigrationError(
        f"State {target.key} in {_named(metadata)} cannot be migrated to its current descriptor: "
        f"column {comparison.column} {comparison.problem}.",
        action="only nullable fields may be added to a state's schema; restore with the previous descriptor, "
        "or give the changed state a new name (its old state is then dropped with --allow-non-restored-state).",
        state=target.key, column=comparison.column, checkpoint_id=metadata.checkpoint_id,
    )
