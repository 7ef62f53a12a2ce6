"""Snapshot strategies: what the handles of a checkpoint point at.

The working state tables live at ``<checkpoints>/shared/<stage>/<state>``
(:func:`working_root`, :func:`working_table_path`).

* INCREMENTAL checkpoint (``checkpoints.mode: incremental``): a handle is the
  working table's current Delta version; nothing is copied. The versions stay
  readable because retention (:mod:`epochal.state.checkpoint.retention`) keeps every file a
  retained checkpoint's version needs, and the Delta log is never truncated.
* FULL checkpoint (``checkpoints.mode: full``) and every SAVEPOINT: each state
  table is copied, read at the handle's version and written as a new Delta
  table with the same schema and the ``epochal.*`` / ``delta.*`` properties of
  that version, to ``<location>/state/<stage>/<state>`` (``location`` is the
  ``chk-<id>`` or ``savepoints/<name>`` folder). The handle then names the copy
  with a path RELATIVE to ``location``: the folder is self-contained and can be
  moved. :func:`~epochal.state.delta.paths.resolve_handle_path` turns a handle and
  the path of its ``_metadata`` back into an absolute Spark path. A small table
  is copied by delta-rs in process (no JVM), a larger one by Spark.

The epoch runner calls :func:`materialize_handles` with the handles a stage
snapshotted and the pending checkpoint, and acknowledges with what it returns.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from epochal.config.models import CheckpointMode
from epochal.state.delta import io as delta_io
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.pending import CheckpointSpec, PendingCheckpoint
from epochal.state.checkpoint.storage import CheckpointStorage, validate_name
from epochal.state.handles import StateHandle
from epochal.state.delta.tables import create_table
from epochal.state.delta.log import DeltaLog, VersionSnapshot
from epochal.state.errors import SnapshotUnavailable, SnapshotWriteError
from epochal.state.delta.objectstore import delta_rs_options, delta_rs_reaches
from epochal.state.delta.paths import is_relative, join_url, resolve_handle_path, resolve_table_url, to_spark, to_url

STATE_DIR = "state"
#: A state table at most this large (bytes of its version's files) is copied in process by delta-rs, a larger
#: one by Spark (:func:`copy_table_version`).
IN_PROCESS_COPY_MAX_BYTES = 64 * 1024 * 1024
COPIED_PROPERTY_PREFIXES = ("epochal.", "delta.")

__all__ = [
    "SnapshotTarget", "copied_properties", "copy_relative_path", "copy_state", "copy_table_version", "is_copy",
    "materialize_handles", "resolve_handle_path", "resolve_table_url", "working_root", "working_table_path",
]


@dataclass(frozen=True)
class SnapshotTarget:
    """How and where one checkpoint stores its state."""

    kind: CheckpointKind
    mode: CheckpointMode
    location: str  # URL of the folder that holds (or will hold) the _metadata

    @classmethod
    def of(cls, checkpoint: PendingCheckpoint | CheckpointSpec | SnapshotTarget) -> SnapshotTarget:
        if isinstance(checkpoint, SnapshotTarget):
            return checkpoint
        spec = checkpoint.spec if isinstance(checkpoint, PendingCheckpoint) else checkpoint
        return cls(spec.kind, spec.mode, spec.location)

    @property
    def self_contained(self) -> bool:
        """Savepoints and full checkpoints copy their state; incremental checkpoints reference it."""
        return self.kind is CheckpointKind.SAVEPOINT or self.mode is CheckpointMode.FULL


def working_root(storage: CheckpointStorage) -> str:
    """Spark path of ``<checkpoints>/shared``: the root to give the state backends."""
    return to_spark(storage.shared_url)


def working_table_path(storage: CheckpointStorage, stage: str, state: str) -> str:
    """Spark path of the working table of one state."""
    return to_spark(storage.shared_dir(stage, state))


def copy_relative_path(handle: StateHandle) -> str:
    """Where a full checkpoint or savepoint keeps its copy of a state, relative to its folder."""
    stage = validate_name(handle.stage, what="stage name")
    state = validate_name(handle.state, what="state name")
    return posixpath.join(STATE_DIR, stage, state)


def materialize_handles(
    spark: Any,
    storage: CheckpointStorage,
    handles: Iterable[StateHandle],
    checkpoint: PendingCheckpoint | CheckpointSpec | SnapshotTarget,
) -> list[StateHandle]:
    """The handles to acknowledge ``checkpoint`` with.

    Incremental checkpoints: ``handles`` unchanged. Full checkpoints and
    savepoints: each state copied under the checkpoint's folder, the returned
    handles naming the copies by relative path. Call it after the stage wrote
    its state for the epoch and before ``coordinator.acknowledge``.
    """
    target = SnapshotTarget.of(checkpoint)
    handles = list(handles)
    if not target.self_contained:
        return handles
    _check_not_completed(storage, target)
    return [copy_state(spark, storage, handle, target.location) for handle in handles]


def _check_not_completed(storage: CheckpointStorage, target: SnapshotTarget) -> None:
    metadata = f"{target.location.rstrip('/')}/_metadata"
    if storage.exists(metadata):
        raise SnapshotWriteError(
            f"{target.location} already holds a completed checkpoint or savepoint ({metadata}); "
            "its state copies are never overwritten.",
            action="take the savepoint under another name.",
            path=metadata,
        )


def copy_state(
    spark: Any, storage: CheckpointStorage, handle: StateHandle, location: str, *, metadata_path: str | None = None
) -> StateHandle:
    """Copy the table version ``handle`` names to ``<location>/state/<stage>/<state>``; return its handle.

    A copy left by an interrupted attempt at the same place is deleted first
    (the folder has no ``_metadata`` yet, so nothing refers to it).
    """
    relative = copy_relative_path(handle)
    target_url = join_url(location, relative)
    source_url = resolve_table_url(handle, metadata_path)
    snapshot = DeltaLog(source_url).snapshot(handle.version)
    storage.delete_tree(target_url)
    copy_table_version(spark, source_url, snapshot, target_url, rows=handle.rows)
    copied = DeltaLog(target_url)
    copy = copied.snapshot(_latest(copied))
    return handle.model_copy(
        update={
            "table_path": relative,
            "version": copy.version,
            "bytes_total": copy.bytes_total,
            "bytes_added": copy.bytes_total,
        }
    )


def _latest(table: DeltaLog) -> int:
    latest = table.latest_version()
    if latest is None:
        raise SnapshotUnavailable(f"No Delta table was written at {table.url}.", path=table.url)
    return latest


def copied_properties(configuration: Mapping[str, str]) -> dict[str, str]:
    """The table properties a copy keeps: ``epochal.*`` and ``delta.*``."""
    return {k: v for k, v in configuration.items() if k.startswith(COPIED_PROPERTY_PREFIXES)}


def copy_table_version(
    spark: Any, source_url: str, snapshot: VersionSnapshot, target_url: str, *, rows: int | None = None
) -> None:
    """Write ``snapshot`` of the table at ``source_url`` as a new Delta table at ``target_url``.

    The new table is created with the exact schema (NOT NULL columns kept) and
    properties of that version (one commit), then the rows are appended (a
    second commit, skipped when ``rows`` is 0). A small table (at most
    :data:`IN_PROCESS_COPY_MAX_BYTES`, on a local or S3 location) is copied by
    delta-rs in this process, so a savepoint of small state starts no JVM; a
    larger one is Spark's work, spread over its executors.
    """
    # The canonical form: a copy opens with any Delta reader (no deletion vectors).
    properties = {**copied_properties(snapshot.configuration), **delta_io.PORTABLE_TABLE_PROPERTIES}
    if snapshot.bytes_total <= IN_PROCESS_COPY_MAX_BYTES and all(delta_rs_reaches(u) for u in (source_url, target_url)):
        _copy_with_delta_rs(source_url, snapshot, target_url, properties, empty=rows == 0)
        return
    target = to_spark(target_url)
    create_table(spark, target, snapshot.schema, properties)
    if rows == 0:
        return
    data = delta_io.read_version(spark, to_spark(source_url), snapshot.version)
    data.write.format("delta").mode("append").save(target)


def _copy_with_delta_rs(
    source_url: str, snapshot: VersionSnapshot, target_url: str, properties: Mapping[str, str], *, empty: bool
) -> None:
    """The copy by delta-rs: the version read through its query engine (deletion vectors applied), streamed in
    record batches into a table created with the version's exact Delta schema."""
    from deltalake import DeltaTable, QueryBuilder, Schema, write_deltalake

    source, target = to_url(source_url), to_url(target_url)
    source_options, target_options = (delta_rs_options(u, os.environ) for u in (source, target))
    DeltaTable.create(target, schema=Schema.from_json(snapshot.schema_json), configuration=dict(properties),
                      storage_options=target_options, raise_if_key_not_exists=False)  # epochal.* keys
    if empty:
        return
    table = DeltaTable(source, version=snapshot.version, storage_options=source_options)
    batches = QueryBuilder().register("state", table).execute("SELECT * FROM state")
    write_deltalake(target, batches, mode="append", storage_options=target_options)


def is_copy(handle: StateHandle) -> bool:
    """True for a handle naming a self-contained copy (a path relative to its ``_metadata``)."""
    return is_relative(handle.table_path)
