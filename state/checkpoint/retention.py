"""Retention: release subsumed checkpoints and the shared state files nothing retained needs.

How files are chosen: the set difference of file sets, not Delta VACUUM.

* VACUUM decides by time (files tombstoned before ``now - RETAIN n HOURS``),
  while what we know is a VERSION: the oldest version a retained checkpoint
  references. Turning it into a cutoff relies on commit timestamps (writers'
  wall clocks, hour-granular ``RETAIN``) and on the engine reading the wall
  clock; at equal timestamps it either deletes a needed file or keeps an
  unneeded one. It also runs Spark jobs on every table at every epoch.
* The file-set difference is exact and needs no Spark: the files kept for a
  working table are the union of the data and deletion-vector files of its
  needed versions, read from the Delta log with fsspec
  (:mod:`epochal.state.delta.log`); every other file in the table folder is
  deleted, leftovers of failed writes included.

Needed versions of a working table (``<checkpoints>/shared/<stage>/<state>``):
its current version, every version a handle of a retained checkpoint or
savepoint in the store references (resolved against its ``_metadata``), and the
versions acknowledged by in-flight (pending) checkpoints. Copies of full
checkpoints and savepoints live in their own folders, never under ``shared/``:
retention never touches savepoints. The Delta log is never touched either, so
it keeps covering every retained version.

``release_subsumed`` runs in named steps::

    _release_shared_files     per working table: delete the files of no needed version
    _delete_subsumed_dirs     chk-<id>/ of checkpoints awaiting release (_metadata, full-mode copies)
    store.mark_released       only after both succeeded
    _delete_uncommitted_dirs  chk-<id>/ of failed completions (not in the store, not pending)
    discard_abandoned_savepoints  savepoint folders still marked in progress, not committed, not pending

Crash safety and idempotence: what is needed is computed from committed state
(the store, the Delta logs) before anything is deleted, and only files outside
it are deleted, so a crash at any instant deletes nothing needed. Every step
skips what is already gone, so the next run finishes the work; entries stay
``awaiting_release`` until then.

Concurrency: run it between epochs, from the pipeline's single writer (the
epoch runner). A file written by a transaction that has not committed yet looks
like a leftover of a failed write and would be deleted.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import fsspec

from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.checkpoint.coordinator import CheckpointCoordinator
from epochal.state.checkpoint.ids import FileIdCounter
from epochal.state.checkpoint.metadata import deserialize
from epochal.state.checkpoint.pending import PendingCheckpoint
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.storage import METADATA_FILE, SAVEPOINT_IN_PROGRESS, CheckpointStorage
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.errors import EpochalStateError
from epochal.state.handles import StateHandle
from epochal.state.delta.cleanup import LogEntries, grace_versions, log_entries, prune_log, recently_written
from epochal.state.delta.log import DeltaLog, working_tables
from epochal.state.errors import RetentionError
from epochal.state.delta.paths import is_relative, resolve_table_url, to_url

log = logging.getLogger(__name__)

Deleter = Callable[[str], None]

__all__ = [
    "RetentionReport", "TableRelease", "delete_url", "needed_versions", "plan_table_release", "release",
    "release_subsumed",
]


def delete_url(url: str) -> None:
    """Delete one file; a file already gone is fine (idempotent)."""
    fs, path = fsspec.core.url_to_fs(url)
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass


@dataclass(frozen=True)
class TableRelease:
    """What retention kept and deleted in one working table."""

    stage: str
    state: str
    table_url: str
    kept_versions: tuple[int, ...]
    kept_files: frozenset[str]  # table-relative data and deletion-vector files
    deleted: tuple[str, ...]  # URLs


@dataclass(frozen=True)
class RetentionReport:
    released: tuple[int, ...]
    deleted_checkpoint_dirs: tuple[str, ...]
    deleted_uncommitted_dirs: tuple[str, ...]
    tables: tuple[TableRelease, ...]

    @property
    def deleted_files(self) -> int:
        return sum(len(t.deleted) for t in self.tables)


# ------------------------------------------------------------------------------ plan


def needed_versions(
    store: CompletedCheckpointStore, *, in_flight: Iterable[StateHandle] = ()
) -> dict[str, set[int]]:
    """Versions referenced by retained checkpoints and savepoints (and in-flight acks), by table URL."""
    needed: dict[str, set[int]] = defaultdict(set)
    for entry in store.all():
        for handle in entry.handles:
            needed[resolve_table_url(handle, entry.metadata_path)].add(handle.version)
    for handle in in_flight:
        if not is_relative(handle.table_path):
            needed[to_url(handle.table_path)].add(handle.version)
    return needed


@dataclass(frozen=True)
class _TablePlan:
    stage: str
    state: str
    table: DeltaLog
    kept_versions: tuple[int, ...]
    keep: frozenset[str]
    delete: tuple[str, ...]  # table-relative physical files
    log: LogEntries | None = None  # the _delta_log listing the plan was made from


def plan_table_release(
    stage: str, state: str, table_url: str, versions: Iterable[int], *, now: float | None = None, delay_s: float = 0.0
) -> _TablePlan | None:
    """What to keep and delete in one working table; None if it is not a Delta table.

    Kept: the files of the latest version, of ``versions``, and (grace period) of every version that was
    the latest within the last ``delay_s`` seconds, and any file written within them.
    """
    table = DeltaLog(table_url)
    latest = table.latest_version()
    if latest is None:
        return None
    now = time.time() if now is None else now
    listed = log_entries(table_url)  # one listing for the grace period and the log pruning
    wanted = {latest} | grace_versions(table_url, now=now, delay_s=delay_s, listed=listed)
    for version in versions:
        if version <= latest:
            wanted.add(version)
        else:
            log.warning("a retained checkpoint references version %s of %s, newer than its latest %s "
                        "(the table was recreated?)", version, table.url, latest)
    snapshots = table.snapshots(wanted)
    keep = frozenset(p for s in snapshots.values() for p in s.physical_files)
    on_disk = table.files_on_disk()
    unneeded = [owner for owner in sorted(on_disk) if owner not in keep]
    fresh = recently_written(table.fs, table.root, unneeded, now=now, delay_s=delay_s)
    delete = tuple(p for owner in unneeded if owner not in fresh for p in sorted(on_disk[owner], key=_crc_last))
    return _TablePlan(stage, state, table, tuple(sorted(wanted)), keep, delete, listed)


def _crc_last(path: str) -> tuple[bool, str]:
    return path.endswith(".crc"), path


# ----------------------------------------------------------------------------- steps


def _release_shared_files(
    storage: CheckpointStorage, store: CompletedCheckpointStore, in_flight: list[StateHandle], deleter: Deleter,
    clock: _Grace,
) -> tuple[list[TableRelease], list[str]]:
    """Delete, in every working table (and the store's own table), the files and log entries no needed
    version holds; return reports and errors."""
    needed = needed_versions(store, in_flight=in_flight)
    tables = working_tables(storage.shared_url)
    store_url = getattr(store, "table_url", None)
    if store_url is not None:
        tables.append(("_completed", "store", store_url))
    releases, errors = [], []
    for stage, state, url in tables:
        try:
            plan = plan_table_release(stage, state, url, needed.get(url, ()), now=clock.now, delay_s=clock.delay_s)
        except (EpochalStateError, OSError) as exc:
            errors.append(f"{stage}/{state} ({url}): {exc}")
            continue
        if plan is None:
            continue
        deleted = []
        for relative in plan.delete:
            deleter(plan.table.physical_url(relative))
            deleted.append(plan.table.physical_url(relative))
        deleted += prune_log(url, min(plan.kept_versions), now=clock.now, delay_s=clock.delay_s, listed=plan.log)
        releases.append(TableRelease(stage, state, url, plan.kept_versions, plan.keep, tuple(deleted)))
    return releases, errors


@dataclass(frozen=True)
class _Grace:
    now: float
    delay_s: float


def _delete_subsumed_dirs(storage: CheckpointStorage, awaiting: list[CompletedCheckpoint]) -> list[str]:
    """Delete the ``chk-<id>/`` folder of each subsumed checkpoint; savepoint folders are never deleted."""
    deleted = []
    for entry in awaiting:
        if entry.is_savepoint:
            continue
        folder = storage.checkpoint_dir(entry.checkpoint_id)
        storage.delete_tree(folder)
        deleted.append(folder)
    return deleted


def _delete_uncommitted_dirs(
    storage: CheckpointStorage, store: CompletedCheckpointStore, pending_ids: Iterable[int]
) -> list[str]:
    """Delete ``chk-<id>/`` folders left by failed or interrupted completions."""
    deleted = []
    for checkpoint_id, folder in CheckpointResolver(storage, store).uncommitted_dirs(pending_ids):
        log.info("deleting %s: checkpoint %s was never committed", folder, checkpoint_id)
        storage.delete_tree(folder)
        deleted.append(folder)
    return deleted


def discard_abandoned_savepoints(
    storage: CheckpointStorage, store: CompletedCheckpointStore, pending_ids: Iterable[int] = ()
) -> list[str]:
    """Delete the savepoint folders whose savepoint died before its commit; return them.

    Only folders epochal marked (:data:`SAVEPOINT_IN_PROGRESS`, written before any
    copy) are candidates, so a savepoint folder of another deployment in a shared
    savepoints directory is never touched. A marked folder whose savepoint was
    committed (the process died just after the commit), or that holds another completed savepoint (a marker
    that is not its own), only loses its marker: a completed savepoint is never deleted.
    """
    skip = {int(i) for i in pending_ids}
    deleted = []
    for name in storage.list_savepoints():
        folder = storage.savepoint_dir(name)
        marker = f"{folder}/{SAVEPOINT_IN_PROGRESS}"
        if not storage.exists(marker):
            continue
        try:
            checkpoint_id = int(storage.read(marker).decode() or 0)
        except (ValueError, EpochalStateError):
            checkpoint_id = 0
        if checkpoint_id in skip:
            continue
        if checkpoint_id and store.get(checkpoint_id) is not None:
            storage.delete_tree(marker)
            continue
        committed = _committed_in(storage, store, folder)
        if committed is not None:  # a marker that is not this folder's own: never delete a completed savepoint
            log.warning("keeping %s: it holds completed savepoint %s; only the in-progress marker of checkpoint %s "
                        "is removed", folder, committed, checkpoint_id or "?")
            storage.delete_tree(marker)
            continue
        log.warning("deleting %s: savepoint %s was abandoned before its commit", folder, checkpoint_id or name)
        storage.delete_tree(folder)
        deleted.append(folder)
    return deleted


def _committed_in(storage: CheckpointStorage, store: CompletedCheckpointStore, folder: str) -> int | None:
    """The id of the completed checkpoint whose ``_metadata`` ``folder`` holds, if the store has it."""
    path = f"{folder}/{METADATA_FILE}"
    try:
        if not storage.exists(path):
            return None
        checkpoint_id = int(deserialize(storage.read(path), path=path).checkpoint_id)
    except EpochalStateError:
        return None
    return checkpoint_id if store.get(checkpoint_id) is not None else None


# ----------------------------------------------------------------------------- entry


def release_subsumed(
    spark: Any,
    store: CompletedCheckpointStore,
    storage: CheckpointStorage,
    *,
    pending: Iterable[PendingCheckpoint] = (),
    deleter: Deleter = delete_url,
    cleanup_delay_s: float = 0.0,
    now: float | None = None,
) -> RetentionReport:
    """Release what subsumed checkpoints and failed completions leave behind (see the module docstring).

    ``spark`` is not used (retention reads Delta logs with fsspec); it is
    accepted so the epoch runner calls every lifecycle step the same way.
    ``pending``: checkpoints still in flight (their folders and acknowledged
    versions are kept). Raises :class:`RetentionError` when some table could not
    be examined; nothing needed was deleted and the next run retries. ``cleanup_delay_s`` is the grace
    period (:mod:`epochal.state.delta.cleanup`); ``now`` (seconds since the epoch) defaults to the wall clock.
    """
    pending = list(pending)
    awaiting = store.awaiting_release()
    in_flight = [h for p in pending for ack in p.acks for h in ack.handles]
    grace = _Grace(time.time() if now is None else now, cleanup_delay_s)
    tables, errors = _release_shared_files(storage, store, in_flight, deleter, grace)
    FileIdCounter(storage.ids_url, storage.storage_options).prune()
    dirs = _delete_subsumed_dirs(storage, awaiting)
    released: tuple[int, ...] = ()
    if not errors:
        released = tuple(int(e.checkpoint_id) for e in awaiting)
        store.mark_released(released)
    uncommitted = _delete_uncommitted_dirs(storage, store, [p.checkpoint_id for p in pending])
    uncommitted += discard_abandoned_savepoints(storage, store, [p.checkpoint_id for p in pending])
    report = RetentionReport(released, tuple(dirs), tuple(uncommitted), tuple(tables))
    if errors:
        raise RetentionError(
            f"Retention could not examine {len(errors)} state table(s): {'; '.join(errors)}. "
            "Their files were kept and the subsumed checkpoints stay awaiting release.",
            action="check that the Delta logs of these tables are complete; the next retention run retries.",
            report=report,
        )
    if report.released or report.deleted_files:
        log.info("retention released checkpoints %s and %s shared files", list(released), report.deleted_files)
    return report


def release(coordinator: CheckpointCoordinator, *, deleter: Deleter = delete_url) -> RetentionReport:
    """:func:`release_subsumed` for a coordinator, keeping what its pending checkpoints need."""
    return release_subsumed(
        None, coordinator.store, coordinator.storage, pending=coordinator.pending_checkpoints(), deleter=deleter
    )
