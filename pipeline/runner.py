"""The epoch runner: DESIGN section 3, one epoch at a time.

Each epoch is one transaction (:mod:`epochal.pipeline.epoch`): begin (trigger when a
checkpoint is due), plan the sources (recorded before reading), process the stages in
DAG order, snapshot and ack their state, write the sinks and ack their versions,
complete the checkpoint, retain, done. The runner decides which epochs run, and
recovers, restores and takes savepoints.

``progress.json`` marks an epoch in progress before it touches anything; a run
that finds one in progress restores the latest completed checkpoint (state and
sinks) and replays from its position, reading the recorded plans.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable


from epochal.errors import EpochalError
from epochal.pipeline.deployment import Deployment, declared_states
from epochal.pipeline.epoch import EpochTransaction
from epochal.pipeline.errors import PipelineError, PipelineFailedError, SourceNotFoundError
from epochal.pipeline.lease import leased
from epochal.pipeline.partitions import PartitionKeyError
from epochal.pipeline.progress import Progress
from epochal.pipeline.recovery import Recovery, Restored
from epochal.pipeline.savepoints import take_savepoint
from epochal.pipeline.sinks import refuse_written_sinks
from epochal.pipeline.sources import run_input_bytes
from epochal.state.delta.log import DeltaLog
from epochal.state.errors import EpochalStateError, StateSchemaError
from epochal.state.delta.paths import to_url
from epochal.state.master import check_master_reachable
from epochal.state.session import LazySparkSession, driver_jit, is_short_run

log = logging.getLogger("epochal.runner")


@dataclass
class EpochReport:
    epoch: int
    partition: str
    duration_s: float
    checkpoint_id: int | None = None
    checkpoint_status: str = "none"
    checkpoint_detail: str | None = None
    state_rows: int = 0
    state_bytes: int = 0
    bytes_written: int = 0
    sink_rows: dict[str, int] = field(default_factory=dict)
    metadata_path: str | None = None
    #: Per stage: seconds, and (when a checkpoint completed) its state handles' rows and bytes.
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per sink: seconds and the Delta table's path.
    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per step of the epoch (``begin``, ``plan``, ``stage:<name>``, ``state:<name>``, ``sink:<name>``,
    #: ``complete``, ``retain``, ``done``): seconds, Spark jobs and generated classes compiled
    #: (``epochal.pipeline.steps``).
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Spark jobs the epoch ran.
    spark_jobs: int = 0
    #: Classes Spark generated and compiled while the epoch ran (driver JVM).
    compiled_classes: int = 0
    #: Bytes of the files the sources planned (None: a source that lists no files).
    input_bytes: int | None = None
    #: How Spark evaluated the epoch's expressions: ``generated`` code, ``interpreted`` (an epoch smaller
    #: than ``spark.codegen_min_mb``), or as ``spark.conf`` sets it.
    code: str | None = None
    #: How the epoch's joins ran: ``shuffle`` (an epoch smaller than ``spark.broadcast_join_min_mb``: no broadcast by
    #: size), ``auto`` (Spark broadcasts sides under its threshold), or as ``spark.conf`` sets it.
    joins: str | None = None
    #: Whether the epoch's Delta commits wrote Delta's version checksum files (the run's last epoch: the versions
    #: the next process opens first), or ``"spark.conf"`` when the configuration decides.
    checksums: bool | str = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunReport:
    epochs: list[EpochReport] = field(default_factory=list)
    restored: Restored | None = None
    #: The driver JVM's compilers (``spark.jit``): ``quick`` or ``tiered``; None when the run started no Spark.
    jit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        restored = None if self.restored is None else self.restored.to_dict()
        return {"epochs": [e.to_dict() for e in self.epochs], "restored": restored, "jit": self.jit}


class EpochRunner:
    def __init__(self, deployment: Deployment, *, on_epoch: Callable[[EpochReport], None] | None = None) -> None:
        self.d = deployment
        self.on_epoch = on_epoch
        #: Called as soon as a run has restored the state, before its epochs, with the restore and whether it was
        #: the backfill's own (``--from``: rewinding to before its first partition) rather than a recovery after a
        #: run or restore that died.
        self.on_restore: Callable[[Restored, bool], None] | None = None
        self.recovery = Recovery(deployment)
        self._last_checkpoint_epoch: int | None = None
        #: The last epoch the first announced run goes to (:meth:`expect_run`): an epoch before it is not where
        #: the next process starts, whatever the run that runs it.
        self._announced_last: int | None = None
        self._sources_checked = False

    # -- public ----------------------------------------------------------------------------

    def run(
        self, *, to: str | None = None, from_: str | None = None, now: datetime | None = None, replan: bool = False
    ) -> RunReport:
        """Run epochs in order (DESIGN section 6, ``epochal run``).

        With ``from_`` at or before the state's position this is a backfill: the newest
        checkpoint or savepoint before ``from_`` is restored and every epoch from its
        position on is replayed with fresh source plans. ``replan`` also re-plans epochs
        that run in order (a Dagster backfill runs one partition per run).

        Changed partitions, a failed pipeline, a bad range and a source whose input is missing are refused before
        the lease is taken: nothing is written, not even a lease record in a new checkpoint folder (probe 13). The
        range is checked again holding the lease, where another run may have moved the state in between.
        """
        self.d.check_partitions()
        self._refuse_failed()
        self._check_range(from_, to, now)
        self._check_sources()
        return self._run(to=to, from_=from_, now=now, replan=replan)

    def _refuse_failed(self) -> None:
        if (failure := self.d.coordinator.pipeline_failure) is not None:
            raise PipelineFailedError(failure.summary)

    @leased("run")
    def _run(self, *, to: str | None, from_: str | None, now: datetime | None, replan: bool) -> RunReport:
        self._refuse_failed()
        self._check_range(from_, to, now)  # refused before any work or JVM
        self._check_states(from_)
        self.expect_run(to=to, now=now, from_=from_)
        report = RunReport()
        report.restored, recovered_by_backfill = self.recovery.before_run(from_)
        progress = self.d.progress.load()
        position = progress.last_done_epoch
        if position is None and progress.clean and report.restored is None and self.d.coordinator.store.latest() is None:
            refuse_written_sinks(self.d.sinks, self.d.storage.base_url)  # never start from empty state silently
        recovered = report.restored
        if from_ is not None:
            first, backfill = self._backfill_start(from_, position, report, recovered_by_backfill)
            replan = replan or backfill
        else:
            first = (position + 1) if position is not None else 0
        last = self._last_epoch(to, now)
        self._count_interval_from(report.restored, first)
        if report.restored is not None and self.on_restore is not None:
            self.on_restore(report.restored, recovered_by_backfill or report.restored is not recovered)
        ends_announced = last >= (self._announced_last or 0)  # else this process runs on past ``last``
        if first <= last:  # a SinkSpec changed since its table was written: said before any stage runs
            for sink in self.d.sinks.values():
                sink.check_table(first, self.d.partitioning.key(first))
        for epoch in range(first, last + 1):
            try:
                done = self.run_epoch(epoch, replan=replan, last_of_run=ends_announced and epoch == last)
            except Exception as exc:
                try:
                    exc.run_report = report  # the epochs this run finished before the failure (`epochal run` shows them)
                except AttributeError:  # an exception type without a __dict__
                    pass
                raise
            report.epochs.append(done)
            if (failure := self.d.coordinator.pipeline_failure) is not None:  # past the tolerable failures: stop
                raise PipelineFailedError(
                    f"checkpoint {done.checkpoint_id} {done.checkpoint_status}"
                    f"{f' ({done.checkpoint_detail})' if done.checkpoint_detail else ''}; {failure.summary}",
                    epoch=epoch, partition=done.partition, report=report,
                )
        if ends_announced:
            self._announced_last = None  # reached: the next run announces its own
        report.jit = driver_jit(self.d.spark)
        return report

    def _count_interval_from(self, restored: Restored | None, first: int) -> None:
        """Where the checkpoint interval counts from in a run whose first epoch is ``first``."""
        latest = self.d.coordinator.store.latest()
        self._last_checkpoint_epoch = None if latest is None else int(latest.metadata.epoch)
        if restored is not None:  # the state is at the restored epoch, whatever newer checkpoints exist
            self._last_checkpoint_epoch = restored.epoch
        elif self._last_checkpoint_epoch is not None and (first - 1) < self._last_checkpoint_epoch:
            # A savepoint (or checkpoint) ahead of the state, after a restore by another process:
            # the interval counts from the state's position.
            self._last_checkpoint_epoch = first - 1

    def _check_range(self, from_: str | None, to: str | None, now: datetime | None) -> None:
        """Refuse a bad key, a window still open, a ``to`` before ``from_`` (it rewound the state and the sinks to
        ``from_`` and ran nothing), a ``from_`` past the state's next epoch and a backfill with no checkpoint or
        savepoint retained before ``from_``, before any work or JVM."""
        last = self._last_epoch(to, now)
        if from_ is None:
            return
        first = self.d.partitioning.epoch(from_)
        if to is not None and last < first:
            raise PartitionKeyError(f"--to {to} is before --from {from_}: a run goes forward, from --from to --to")
        progress = self.d.progress.load()
        self._refuse_gap(from_, first, progress.last_done_epoch)
        if first <= progress.in_flight:  # a backfill: it restores a checkpoint or savepoint before ``from_``
            self.recovery.candidates_before(first)

    def _check_states(self, from_: str | None) -> None:
        """Refuse a run whose pipeline no longer declares a state its working tables hold (a stage removed or renamed
        since the last epoch), or declares again one whose working table an older version left (removed, then
        back): the run went on without a word, a renamed stage from empty state (its upsert sink overwritten with
        one epoch's totals), a re-added one from rows older than the epochs between. A restore reconciles them.
        A state whose value type, state type (mode) or max parallelism changed is refused here too, not at its
        first write in the middle of an epoch (which left that epoch to a recovery that failed the same way), unless
        the run is a backfill, whose restore checks them (and migrates an added nullable field)."""
        progress = self.d.progress.load()
        if not progress.clean:  # a recovery restores (and checks, migrating what it can) first
            return
        if progress.states is not None:  # None: a progress file older than the declared states
            self._check_declared(progress)
        position = progress.last_done_epoch
        if from_ is None or position is None or self.d.partitioning.epoch(from_) > position:  # not a backfill
            refused: list[EpochalStateError] = []  # every changed state named, not only the first
            for target in self.recovery.targets():
                backend = (self.d.keyed if target.is_keyed else self.d.operator)[target.stage]
                try:
                    backend.check(target.descriptor)
                except EpochalStateError as exc:
                    refused.append(exc)
            if len(refused) == 1:
                raise refused[0]
            if refused:
                raise StateSchemaError("; ".join(e.message for e in refused), action=refused[0].action,
                                       states=[e.context.get("state") for e in refused])

    def _check_declared(self, progress: Progress) -> None:
        since = "the beginning" if progress.last_done_epoch is None else self.d.partitioning.key(progress.last_done_epoch)
        if gone := sorted(set(progress.states) - set(declared_states(self.d.pipeline))):
            raise PipelineError(
                f"the pipeline no longer declares state {', '.join(gone)}, which the state at {since} holds "
                "(a stage or state removed or renamed)",
                action="run `epochal restore --allow-non-restored-state` to drop it (Flink's allowNonRestoredState; "
                "--savepoint PATH to start from a savepoint), or declare it again",
                states=gone,
            )
        stale = [t.key for t in self.recovery.targets() if t.key not in progress.states
                 and DeltaLog(to_url(t.working_path)).exists()]
        if stale:
            raise PipelineError(
                f"state {', '.join(sorted(stale))} is declared again, but its working table holds what an older "
                f"version of the pipeline wrote (it was not declared at {since})",
                action="run `epochal restore` first: it empties that table (or restores it from a checkpoint that "
                "holds it), then run",
                states=stale,
            )

    def _refuse_gap(self, from_: str, first: int, position: int | None) -> None:
        """A run cannot start past the state's next epoch (a recovery only moves the state back)."""
        if first > (position + 1 if position is not None else 0):
            expected = self.d.partitioning.key(position + 1 if position is not None else 0)
            raise PipelineError(
                f"cannot start at {from_}: the state is at "
                f"{self.d.partitioning.key(position) if position is not None else 'the beginning'}; "
                f"run from {expected} first (epochs run in order)"
            )

    def _backfill_start(self, from_: str, position: int | None, report: RunReport, recovered: bool) -> tuple[int, bool]:
        """The first epoch of a run ``--from``, and whether it is a backfill (then restored first, into ``report``)."""
        first = self.d.partitioning.epoch(from_)
        if recovered or (position is not None and first <= position):
            if not recovered:
                report.restored = self.restore_before(first)
            restored_epoch = report.restored.epoch
            # A checkpoint older than from_ - 1 (interval > 1, or a savepoint): replay up to from_ too.
            return (0 if restored_epoch is None else min(first, restored_epoch + 1)), True
        self._refuse_gap(from_, first, position)
        return first, False

    def expect_run(self, *, to: str | None = None, now: datetime | None = None, from_: str | None = None) -> None:
        """Start a session not started yet for this run (``spark.jit: auto``): tell it how long the run is, the
        epochs from the state's position (or ``from_``) to ``to`` and the state's size at the last checkpoint,
        then start it when there is an epoch to run, before the epoch protocol marks anything in progress (a JVM
        that cannot start fails the run with nothing touched). A run with nothing to do starts no JVM. The first
        word counts: a process that calls :meth:`run` once per epoch says how many first."""
        if self._announced_last is None:
            try:
                self._announced_last = self._last_epoch(to, now)
            except Exception:  # noqa: BLE001 - the run itself reports a bad key
                pass
        spark = self.d.spark
        if not isinstance(spark, LazySparkSession) or spark.started:
            return
        self._check_sources()
        if not spark.expected:
            try:
                position = self.d.progress.load().last_done_epoch
                first = (position + 1) if position is not None else 0
                if from_ is not None:
                    first = min(first, self.d.partitioning.epoch(from_))
                epochs = self._last_epoch(to, now) - first + 1
                if epochs <= 0:
                    return
                latest = self.d.coordinator.store.latest()
                short = self._short_run(first, epochs, latest.metadata.state_bytes if latest is not None else 0)
            except Exception:  # noqa: BLE001 - the run itself reports a bad key or storage, before any Spark
                return
            spark.expect(short_run=short)
        spark.get()

    def _check_sources(self) -> None:
        """Before a run's first JVM and before its lease: the sources' own checks, so that a landing folder that
        does not exist fails the run with nothing touched, not even a lease record in a new checkpoint folder
        (probe 13); and a standalone master that accepts no connection. Once per runner: a run's later epochs have
        passed it."""
        spark = self.d.spark
        if self._sources_checked or not isinstance(spark, LazySparkSession) or spark.started:
            return
        for source in self.d.pipeline.sources:
            if callable(check := getattr(source, "check", None)):
                try:
                    check()  # a landing folder that does not exist: no JVM, nothing touched
                except EpochalError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a user's own source: say which, and what it raised
                    raise SourceNotFoundError(f"source {source.name!r}: its check() failed: {type(exc).__name__}: {exc}",
                                              action="fix the source's input or its configuration, then run again",
                                              source=source.name) from exc
        check_master_reachable(self.d.settings.spark.master)  # a standalone master nobody answers at: named now
        self._sources_checked = True

    def _short_run(self, first: int, epochs: int, state_bytes: int) -> bool:
        """``spark.jit: auto``'s choice (:func:`is_short_run`); the sources are sized only when that can change it."""
        settings = self.d.settings.spark
        decided = is_short_run(settings, epochs, state_bytes)
        if decided or not is_short_run(settings, epochs, state_bytes, 0):
            return decided
        infos = [self.d.partitioning.info(epoch) for epoch in range(first, first + epochs)]
        return is_short_run(settings, epochs, state_bytes, run_input_bytes(self.d.pipeline.sources, infos))

    def _last_epoch(self, to: str | None, now: datetime | None) -> int:
        """The last epoch of a run to ``to``, or to the latest closed window; refuses a window still open at ``now``
        (its files may still land: an epoch is done once, and what lands after it would never be read)."""
        partitioning = self.d.partitioning
        closed = partitioning.latest_closed_epoch(now or datetime.now(timezone.utc))
        if to is None:
            return -1 if closed is None else closed
        last = partitioning.epoch(to)
        if closed is None or last > closed:
            latest = "none has closed yet" if closed is None else f"the latest closed partition is {partitioning.key(closed)!r}"
            raise PartitionKeyError(
                f"partition {to!r} has not closed yet: its window ends at "
                f"{partitioning.info(last).window_end:%Y-%m-%d %H:%M} UTC, and a partition runs once its window "
                f"has ended (files may still land in an open one); {latest}"
            )
        return last

    def checkpoint_due(self, epoch: int) -> bool:
        if self._last_checkpoint_epoch is None:
            return (epoch + 1) % self.d.settings.checkpoints.interval_epochs == 0
        return epoch - self._last_checkpoint_epoch >= self.d.settings.checkpoints.interval_epochs

    # -- one epoch ---------------------------------------------------------------------------

    @leased("run")
    def run_epoch(
        self, epoch: int, *, replan: bool = False, force_checkpoint: bool = False, last_of_run: bool = True
    ) -> EpochReport:
        """Run one epoch as one transaction (:class:`epochal.pipeline.epoch.EpochTransaction`); ``last_of_run``:
        the next epoch runs in another process, so its commits write Delta's checksum files."""
        started = time.monotonic()
        report = EpochReport(epoch, self.d.partitioning.info(epoch).partition, 0.0)
        checkpoint = force_checkpoint or self.checkpoint_due(epoch)
        EpochTransaction(self.d, epoch, report, checkpoint=checkpoint, replan=replan, checksums=last_of_run).run()
        if report.checkpoint_status == "completed":
            self._last_checkpoint_epoch = epoch
        report.duration_s = round(time.monotonic() - started, 3)
        if self.on_epoch:
            self.on_epoch(report)
        return report

    # -- recovery, restore, savepoints -------------------------------------------------------

    def recover(self, progress) -> Restored:
        """After a run that died mid-epoch, or a restore that died half-way: restore again."""
        return self.recovery.recover(progress)

    def restore(self, pointer: str | int | None = None, **options: Any) -> Restored:
        """Restore state and sinks to a checkpoint (latest usable when None) or a savepoint; ``parallelism=``
        rescales (:meth:`epochal.pipeline.recovery.Recovery.restore` names every option). A pointer that names
        nothing restorable is refused before the lease: nothing is written (probe 14)."""
        if pointer is not None:
            from epochal.state.recovery.restore import check_pointer  # as Recovery.restore imports restore_state

            check_pointer(self.d.coordinator, pointer)
        return self.recovery.restore(pointer, **options)

    def restore_before(self, epoch: int) -> Restored:
        """Restore the newest checkpoint or savepoint whose epoch is before ``epoch`` (empty state if none)."""
        return self.recovery.restore_before(epoch)

    @leased("savepoint")
    def savepoint(self, name: str | None = None) -> dict[str, Any]:
        """Take a savepoint of the state at its current position (a self-contained copy)."""
        return take_savepoint(self, name)
