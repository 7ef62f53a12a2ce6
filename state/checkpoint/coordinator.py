"""The checkpoint coordinator: trigger, collect acks, complete, abort, expire.

It owns no I/O of its own: the clock, the id counter, the storage, the
completed-checkpoint store, the stats tracker, the failure manager and the
user hooks are injected. Completion runs as named steps::

    _finalize_metadata   build the frozen _metadata record (pure)
    _write_metadata      write chk-<id>/_metadata (or savepoints/<name>/_metadata) atomically
    _commit              add to the completed-checkpoint store: THE atomic step (fenced just before)
    _after_commit        mark completed, subsume older pending checkpoints, stats, failure reset

The injected ``fence`` (:mod:`epochal.state.fence`) is called before ``_metadata`` and
before ``_commit``: a writer fenced off (a newer holder of the deployment) gets
``WriterFenced`` and neither completes nor aborts anything. Any other failure (an
exception) in the first three steps aborts the checkpoint with FINALIZE_FAILED; a
crash (the process dies) anywhere leaves the store as it was before ``_commit`` or
after it, never in between, so the previous checkpoint stays the latest until the
new one is committed. Files are never
deleted here: a ``_metadata`` whose commit did not happen is simply not a
checkpoint (see :mod:`epochal.state.checkpoint.resolve`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from epochal.config.models import CheckpointMode
from epochal.state.checkpoint.clock import Clock
from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.errors import (
    CheckpointError,
    HookError,
    IllegalCheckpointTransition,
    InvalidCheckpointRequest,
    PipelineFailed,
    SavepointAlreadyExists,
    WriterFenced,
)
from epochal.state.checkpoint.failure import CheckpointFailureManager
from epochal.state.checkpoint.hooks import MasterTriggerRestoreHook, check_identifiers, restore_hooks, trigger_hooks
from epochal.state.checkpoint.ids import CheckpointIdCounter
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata, SinkPosition, require_json, serialize
from epochal.state.checkpoint.outcomes import (  # noqa: F401 - re-exported: the coordinator's vocabulary
    Acknowledgement,
    Completion,
    CoordinatorPolicy,
    TriggerRequest,
    TriggerResult,
)
from epochal.state.checkpoint.pending import AckResult, CheckpointSpec, PendingCheckpoint, PendingStatus
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason as Reason
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.stats import CheckpointStatsTracker
from epochal.state.checkpoint.storage import SAVEPOINT_IN_PROGRESS, CheckpointStorage, validate_name
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.fence import Fence, no_fence
from epochal.state.handles import StateHandle
from epochal.state.ids import CheckpointId, Epoch

log = logging.getLogger(__name__)


class CheckpointCoordinator:
    """Triggers checkpoints, collects acknowledgements and completes, aborts or expires them.

    One coordinator per pipeline run, called from one thread (the epoch runner).
    """

    def __init__(
        self,
        *,
        storage: CheckpointStorage,
        store: CompletedCheckpointStore,
        clock: Clock,
        id_counter: CheckpointIdCounter,
        stats: CheckpointStatsTracker | None = None,
        failures: CheckpointFailureManager | None = None,
        hooks: Sequence[MasterTriggerRestoreHook] = (),
        policy: CoordinatorPolicy = CoordinatorPolicy(),
        fence: Fence = no_fence,
    ) -> None:
        check_identifiers(hooks)
        #: Called before ``_metadata`` is written and again just before the store commit; a
        #: :class:`WriterFenced` it raises propagates (the checkpoint is neither completed nor aborted).
        self.fence = fence
        self._storage, self._store, self._clock, self._ids = storage, store, clock, id_counter
        self._stats = stats if stats is not None else CheckpointStatsTracker()
        self._failures = failures if failures is not None else CheckpointFailureManager()
        self._hooks = tuple(hooks)
        self._policy = policy
        self._resolver = CheckpointResolver(storage, store)
        self._pending: dict[CheckpointId, PendingCheckpoint] = {}
        self._finished: dict[CheckpointId, PendingStatus] = {}
        self._last_completion: datetime | None = None
        self._last_completion_known = False
        self._shut_down = False

    # ----------------------------------------------------------------- queries
    @property
    def storage(self) -> CheckpointStorage:
        return self._storage

    @property
    def store(self) -> CompletedCheckpointStore:
        return self._store

    @property
    def stats(self) -> CheckpointStatsTracker:
        return self._stats

    def last_claimed_id(self) -> int | None:
        """The highest checkpoint id claimed so far (ids only grow: a later snapshot has a higher one)."""
        last = self._ids.last_id()
        return None if last is None else int(last)

    @property
    def failures(self) -> CheckpointFailureManager:
        return self._failures

    @property
    def policy(self) -> CoordinatorPolicy:
        return self._policy

    @property
    def is_shut_down(self) -> bool:
        return self._shut_down

    @property
    def pipeline_failure(self) -> PipelineFailed | None:
        return self._failures.pipeline_failure

    def pending_checkpoints(self) -> list[PendingCheckpoint]:
        """The pending checkpoints and savepoints, by ascending id."""
        return [self._pending[i] for i in sorted(self._pending)]

    def get_pending(self, checkpoint_id: int) -> PendingCheckpoint | None:
        return self._pending.get(CheckpointId(checkpoint_id))

    # ----------------------------------------------------------------- trigger
    def trigger(
        self,
        epoch: int,
        tasks: Iterable[str],
        source_positions: Mapping[str, Any] | None = None,
        *,
        running_tasks: Iterable[str] | None = None,
        kind: CheckpointKind = CheckpointKind.CHECKPOINT,
        savepoint_name: str | None = None,
        mode: CheckpointMode | None = None,
        max_parallelism: int | None = None,
    ) -> TriggerResult:
        """Start a checkpoint of ``epoch`` that every task in ``tasks`` must acknowledge.

        ``running_tasks`` (None: all) are the tasks able to run. A decline is a
        TriggerResult with a reason, never an exception; a malformed call
        raises InvalidCheckpointRequest.
        """
        self.expire_overdue()
        request = self._request(epoch, tasks, source_positions, kind, savepoint_name, mode, max_parallelism)
        decline = self._preflight(request, running_tasks)
        if decline is not None:
            return self._decline(decline)
        return self._start(request)

    def trigger_savepoint(
        self,
        epoch: int,
        tasks: Iterable[str],
        source_positions: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        running_tasks: Iterable[str] | None = None,
        max_parallelism: int | None = None,
    ) -> TriggerResult:
        """Start a savepoint (full, never subsumed); ``name`` defaults to ``savepoint-<id>``."""
        return self.trigger(
            epoch, tasks, source_positions, running_tasks=running_tasks, kind=CheckpointKind.SAVEPOINT,
            savepoint_name=name, mode=CheckpointMode.FULL, max_parallelism=max_parallelism,
        )

    def _request(
        self,
        epoch: int,
        tasks: Iterable[str],
        source_positions: Mapping[str, Any] | None,
        kind: CheckpointKind,
        savepoint_name: str | None,
        mode: CheckpointMode | None,
        max_parallelism: int | None,
    ) -> TriggerRequest:
        task_set = frozenset(tasks)
        if not task_set or any(not isinstance(t, str) or not t for t in task_set):
            raise InvalidCheckpointRequest(
                f"A checkpoint needs at least one task (stage or sink) to acknowledge it, by name: {sorted(map(str, task_set))}.",
                epoch=epoch,
            )
        if epoch < 0:
            raise InvalidCheckpointRequest(f"An epoch is >= 0, not {epoch}.", epoch=epoch)
        if max_parallelism is not None and max_parallelism < 1:
            raise InvalidCheckpointRequest(f"max_parallelism is >= 1, not {max_parallelism}.", epoch=epoch)
        if savepoint_name is not None and kind is not CheckpointKind.SAVEPOINT:
            raise InvalidCheckpointRequest("savepoint_name is only for savepoints.", savepoint_name=savepoint_name)
        if savepoint_name is not None:
            self._check_savepoint_name(savepoint_name)
        positions = require_json(dict(source_positions or {}), what="source_positions")
        return TriggerRequest(
            Epoch(epoch), task_set, positions, kind, mode or self._policy.mode, savepoint_name, max_parallelism
        )

    def _check_savepoint_name(self, name: str) -> None:
        taken = any(p.spec.savepoint_name == name for p in self._pending.values())
        folder = self._storage.savepoint_dir(validate_name(name))
        if taken or self._storage.exists(f"{folder}/_metadata"):
            abandoned = not taken and self._storage.exists(f"{folder}/{SAVEPOINT_IN_PROGRESS}")
            raise SavepointAlreadyExists(
                f"A savepoint named {name!r} already exists at {folder}"
                + (" (abandoned half-way: retention deletes it)." if abandoned else "."),
                action="choose another savepoint name" + (", or run retention first." if abandoned else "."),
                name=name,
            )

    def _preflight(self, request: TriggerRequest, running_tasks: Iterable[str] | None) -> CheckpointFailure | None:
        """The first Flink pre-flight check that fails, or None."""
        if self._shut_down:
            return self._failure(None, Reason.COORDINATOR_SHUTDOWN)
        if self._failures.pipeline_failure is not None:
            return self._failure(None, Reason.PIPELINE_FAILED, str(self._failures.pipeline_failure))
        if request.kind is CheckpointKind.CHECKPOINT:
            periodic = self._periodic_checks()
            if periodic is not None:
                return periodic
        missing = request.tasks - set(request.tasks if running_tasks is None else running_tasks)
        if missing:
            return self._failure(None, Reason.NOT_ALL_REQUIRED_TASKS_RUNNING, f"not running: {sorted(missing)}")
        return None

    def _periodic_checks(self) -> CheckpointFailure | None:
        """Concurrency and minimum pause: checked for checkpoints, not for savepoints."""
        running = sum(1 for p in self._pending.values() if not p.is_savepoint)
        if running >= self._policy.max_concurrent:
            return self._failure(None, Reason.TOO_MANY_CONCURRENT_CHECKPOINTS,
                                 f"{running} pending, at most {self._policy.max_concurrent}")
        last = self._last_completion_time()
        if last is not None and self._policy.min_pause_s > 0:
            ready_at = last + timedelta(seconds=self._policy.min_pause_s)
            if self._clock.now() < ready_at:
                return self._failure(None, Reason.MINIMUM_TIME_BETWEEN_CHECKPOINTS, f"next checkpoint at {ready_at.isoformat()}")
        return None

    def _last_completion_time(self) -> datetime | None:
        if not self._last_completion_known and self._policy.min_pause_s > 0:
            latest = self._store.latest()
            self._last_completion = None if latest is None else latest.completed_at
            self._last_completion_known = True
        return self._last_completion

    def _start(self, request: TriggerRequest) -> TriggerResult:
        """Allocate the id, run the trigger hooks and register the pending checkpoint."""
        try:
            checkpoint_id = self._ids.next_id()
        except (CheckpointError, OSError) as exc:
            return self._decline(self._failure(None, Reason.IO_EXCEPTION, f"allocating a checkpoint id: {exc}"))
        try:
            hook_states = trigger_hooks(self._hooks, checkpoint_id, request.epoch)
        except HookError as exc:
            pending = PendingCheckpoint(self._spec(request, checkpoint_id, {}))
            self._fail(pending, self._failure(checkpoint_id, Reason.TRIGGER_HOOK_FAILED, exc.message))
            return TriggerResult(failure=pending.failure)
        pending = PendingCheckpoint(self._spec(request, checkpoint_id, hook_states))
        if pending.is_savepoint:  # before anything is copied into the folder (see retention)
            self._storage.write_atomic(f"{pending.spec.location}/{SAVEPOINT_IN_PROGRESS}", str(checkpoint_id).encode())
        self._pending[checkpoint_id] = pending
        return TriggerResult(pending=pending)

    def _spec(self, request: TriggerRequest, checkpoint_id: CheckpointId, hook_states: dict[str, Any]) -> CheckpointSpec:
        now = self._clock.now()
        name = request.savepoint_name
        if request.kind is CheckpointKind.SAVEPOINT and name is None:
            name = self._free_savepoint_name(checkpoint_id)
        location = self._storage.checkpoint_dir(checkpoint_id) if name is None else self._storage.savepoint_dir(name)
        return CheckpointSpec(
            checkpoint_id=checkpoint_id, epoch=request.epoch, kind=request.kind, mode=request.mode,
            savepoint_name=name, tasks=request.tasks, source_positions=request.source_positions,
            hook_states=hook_states, triggered_at=now, deadline=now + timedelta(seconds=self._policy.timeout_s),
            location=location, metadata_path=f"{location}/_metadata", max_parallelism=request.max_parallelism,
        )

    def _free_savepoint_name(self, checkpoint_id: CheckpointId) -> str:
        """``savepoint-<id>``, or ``savepoint-<id>-<n>`` when a user named a savepoint so (or a folder of that name
        is there): an unnamed savepoint never writes its in-progress marker into a folder it does not own, which
        would make retention take a completed savepoint for an abandoned one."""
        base = name = f"savepoint-{checkpoint_id}"
        taken = {p.spec.savepoint_name for p in self._pending.values()}
        n = 1
        while name in taken or self._storage.exists(self._storage.savepoint_dir(name)):
            n += 1
            name = f"{base}-{n}"
        return name

    def _decline(self, failure: CheckpointFailure) -> TriggerResult:
        self._stats.report_declined(failure.reason)
        self._count(failure)
        return TriggerResult(failure=failure)

    # --------------------------------------------------------------------- ack
    def acknowledge(
        self, checkpoint_id: int, task: str, epoch: int, handles: Iterable[StateHandle] = (),
        sinks: Iterable[SinkPosition] = (), *, complete_when_acknowledged: bool = True,
    ) -> Acknowledgement:
        """Record ``task``'s ack of ``checkpoint_id`` for ``epoch``.

        The last ack completes the checkpoint (Flink's coordinator does the same), unless
        ``complete_when_acknowledged`` is False: then the caller completes it with :meth:`complete`.
        """
        handle_list = tuple(handles)
        if any(not isinstance(h, StateHandle) for h in handle_list):
            raise InvalidCheckpointRequest("An acknowledgement carries StateHandle objects only.", task=task)
        self.expire_overdue()
        pending = self._pending.get(CheckpointId(checkpoint_id))
        if pending is None:
            known = CheckpointId(checkpoint_id) in self._finished
            return Acknowledgement(AckResult.DISCARDED if known else AckResult.UNKNOWN)
        result = pending.acknowledge(task, epoch, handle_list, self._clock.now(), sinks)
        if result is AckResult.SUCCESS and pending.is_fully_acknowledged and complete_when_acknowledged:
            return Acknowledgement(result, self._complete(pending))
        return Acknowledgement(result)

    def complete(self, checkpoint_id: int) -> Completion:
        """Complete a fully acknowledged checkpoint: ``_metadata``, then the store commit.

        A checkpoint that expired or was aborted meanwhile is reported as it failed; one still
        waiting for acks is an :class:`IllegalCheckpointTransition` (a caller's bug).
        """
        self.expire_overdue()
        pending = self._pending.get(CheckpointId(checkpoint_id))
        if pending is None:
            status = self._finished.get(CheckpointId(checkpoint_id))
            reason = Reason.CHECKPOINT_EXPIRED if status is PendingStatus.EXPIRED else Reason.CHECKPOINT_DECLINED
            detail = f"checkpoint {checkpoint_id} is no longer pending ({status.value if status else 'unknown'})"
            return Completion(CheckpointId(checkpoint_id), failure=self._failure(checkpoint_id, reason, detail))
        if not pending.is_fully_acknowledged:
            raise IllegalCheckpointTransition(
                f"Checkpoint {pending.checkpoint_id} cannot complete: waiting for {sorted(pending.not_yet_acknowledged)}.",
                checkpoint_id=pending.checkpoint_id,
            )
        return self._complete(pending)

    # -------------------------------------------------------------- completion
    def _complete(self, pending: PendingCheckpoint) -> Completion:
        """Finish a fully acknowledged checkpoint: metadata, write, commit, then bookkeeping."""
        self.fence(_completing(pending.is_savepoint, pending.checkpoint_id))  # before anything is written
        try:
            metadata = self._finalize_metadata(pending)
            self._write_metadata(pending, metadata)
            completed = CompletedCheckpoint(metadata=metadata, metadata_path=pending.spec.metadata_path)
            subsumed = self._commit(completed)
        except WriterFenced:  # not this checkpoint's failure: another writer owns the deployment now
            raise
        except Exception as exc:  # any failure before the commit aborts this checkpoint
            log.warning("completing checkpoint %s failed: %s", pending.checkpoint_id, exc)
            failure = self._failure(pending.checkpoint_id, Reason.FINALIZE_FAILED, f"{type(exc).__name__}: {exc}")
            self._fail(pending, failure)
            return Completion(pending.checkpoint_id, failure=failure)
        self._after_commit(pending, metadata)
        return Completion(pending.checkpoint_id, completed=completed, subsumed=tuple(subsumed))

    def _finalize_metadata(self, pending: PendingCheckpoint) -> CheckpointMetadata:
        return pending.to_metadata(self._clock.now())

    def _write_metadata(self, pending: PendingCheckpoint, metadata: CheckpointMetadata) -> None:
        self._storage.write_atomic(pending.spec.metadata_path, serialize(metadata))

    def _commit(self, completed: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        self.fence(_completing(completed.is_savepoint, completed.checkpoint_id))  # the process may have stalled
        return self._store.add(completed)

    def _after_commit(self, pending: PendingCheckpoint, metadata: CheckpointMetadata) -> None:
        if pending.is_savepoint:
            self._storage.delete_tree(f"{pending.spec.location}/{SAVEPOINT_IN_PROGRESS}")
        pending.mark_completed(metadata.completed_at)
        self._forget(pending)
        self._last_completion, self._last_completion_known = metadata.completed_at, True
        if not pending.is_savepoint:
            self._subsume_older_than(pending.checkpoint_id)
        self._stats.report_completed(pending, metadata)
        self._failures.record_success()

    def _subsume_older_than(self, checkpoint_id: CheckpointId) -> None:
        for older in [p for p in self.pending_checkpoints() if p.checkpoint_id < checkpoint_id and not p.is_savepoint]:
            self._fail(older, self._failure(older.checkpoint_id, Reason.CHECKPOINT_SUBSUMED, f"by {checkpoint_id}"))

    # -------------------------------------------------------- abort and expire
    def abort(self, checkpoint_id: int, reason: Reason, detail: str = "") -> bool:
        """Abort a pending checkpoint (a stage failed, a sink declined...); False if it was not pending."""
        if reason.pre_flight:
            raise InvalidCheckpointRequest(
                f"{reason.value} is a pre-flight decline reason, not an abort reason.", reason=reason.value
            )
        pending = self._pending.get(CheckpointId(checkpoint_id))
        if pending is None:
            return False
        self._fail(pending, self._failure(pending.checkpoint_id, reason, detail))
        return True

    def expire_overdue(self) -> list[CheckpointId]:
        """Expire every pending checkpoint older than ``timeout_s``; return their ids."""
        now = self._clock.now()
        overdue = [p for p in self.pending_checkpoints() if p.is_overdue(now)]
        for pending in overdue:
            if pending.status is PendingStatus.PENDING:  # an earlier expiry may have failed the pipeline
                detail = f"waiting for {sorted(pending.not_yet_acknowledged)} after {self._policy.timeout_s}s"
                self._fail(pending, self._failure(pending.checkpoint_id, Reason.CHECKPOINT_EXPIRED, detail))
        return [p.checkpoint_id for p in overdue]

    def shutdown(self) -> None:
        """Abort every pending checkpoint and decline every later trigger."""
        self._shut_down = True
        self._abort_all(Reason.CHECKPOINT_ABORTED_ON_SHUTDOWN)

    def _abort_all(self, reason: Reason) -> None:
        for pending in self.pending_checkpoints():
            if pending.status is PendingStatus.PENDING:
                self._fail(pending, self._failure(pending.checkpoint_id, reason))

    def _fail(self, pending: PendingCheckpoint, failure: CheckpointFailure) -> None:
        """Abort ``pending``, record stats, count the failure; fail the pipeline past the limit."""
        pending.abort(failure)
        self._forget(pending)
        self._stats.report_failed(pending, failure)
        self._count(failure)

    def _count(self, failure: CheckpointFailure) -> None:
        """Tell the failure manager; when this failure fails the pipeline, abort what is pending."""
        already_failed = self._failures.pipeline_failure is not None
        if self._failures.record_failure(failure) is not None and not already_failed:
            self._abort_all(Reason.CHECKPOINT_ABORTED_PIPELINE_FAILED)

    def _forget(self, pending: PendingCheckpoint) -> None:
        self._pending.pop(pending.checkpoint_id, None)
        self._finished[pending.checkpoint_id] = pending.status

    def _failure(self, checkpoint_id: int | None, reason: Reason, detail: str = "") -> CheckpointFailure:
        return CheckpointFailure(checkpoint_id=checkpoint_id, reason=reason, detail=detail, at=self._clock.now())

    # ----------------------------------------------------------------- restore
    def resolve(self, pointer: str | int) -> CompletedCheckpoint:
        """The restorable checkpoint a pointer (id, chk-<id> path, savepoint path) names."""
        return self._resolver.resolve(pointer)

    def restore(
        self, pointer: str | int | None = None, *, allow_non_restored_state: bool = False
    ) -> CompletedCheckpoint | None:
        """Pick the checkpoint to restore (``pointer``, else the latest) and run the restore hooks.

        Returns None when ``pointer`` is None and nothing was ever completed
        (start from empty state). Restoring the state tables is the caller's.
        """
        if self._pending:
            raise InvalidCheckpointRequest(
                f"Cannot restore with pending checkpoints {sorted(self._pending)}.",
                action="abort or complete them first.",
            )
        checkpoint = self._store.latest() if pointer is None else self.resolve(pointer)
        if checkpoint is not None:
            restore_hooks(self._hooks, checkpoint.checkpoint_id, checkpoint.metadata.hook_states,
                          allow_non_restored_state=allow_non_restored_state)
            if (advance := getattr(self._ids, "advance_past", None)) is not None:
                advance(int(checkpoint.checkpoint_id))  # the next checkpoint's id comes after the restored one's
        return checkpoint


def _completing(savepoint: bool, checkpoint_id: int) -> str:
    return f"complete {'savepoint' if savepoint else 'checkpoint'} {int(checkpoint_id)}"
