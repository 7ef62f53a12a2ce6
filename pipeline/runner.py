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

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable


from epochal.pipeline.deployment import Deployment
from epochal.pipeline.epoch import EpochTransaction
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.faults import crashpoint
from epochal.pipeline.lease import leased
from epochal.pipeline.savepoints import take_savepoint
from epochal.pipeline.sinks import forward_gap, refuse_written_sinks
from epochal.pipeline.stage import SinkMode
from epochal.state.checkpoint import CompletedCheckpoint

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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RunReport:
    epochs: list[EpochReport] = field(default_factory=list)
    restored: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"epochs": [e.to_dict() for e in self.epochs], "restored": self.restored}


class EpochRunner:
    def __init__(self, deployment: Deployment, *, on_epoch: Callable[[EpochReport], None] | None = None) -> None:
        self.d = deployment
        self.on_epoch = on_epoch
        self._last_checkpoint_epoch: int | None = None

    # -- public ----------------------------------------------------------------------------

    @leased("run")
    def run(
        self, *, to: str | None = None, from_: str | None = None, now: datetime | None = None, replan: bool = False
    ) -> RunReport:
        """Run epochs in order (DESIGN section 6, ``epochal run``).

        With ``from_`` at or before the state's position this is a backfill: the newest
        checkpoint or savepoint before ``from_`` is restored and every epoch from its
        position on is replayed with fresh source plans. ``replan`` also re-plans epochs
        that run in order (a Dagster backfill runs one partition per run).
        """
        report = RunReport()
        report.restored, recovered_by_backfill = self._recover_before_run(from_)
        progress = self.d.progress.load()
        position = progress.last_done_epoch
        if position is None and progress.clean and report.restored is None and self.d.coordinator.store.latest() is None:
            refuse_written_sinks(self.d.sinks, self.d.storage.base_url)  # never start from empty state silently
        if from_ is not None:
            first = self.d.partitioning.epoch(from_)
            if recovered_by_backfill or (position is not None and first <= position):
                if not recovered_by_backfill:
                    report.restored = self.restore_before(first)
                restored_epoch = report.restored["epoch"]
                # A checkpoint older than from_ - 1 (interval > 1, or a savepoint): replay up to from_ too.
                first = 0 if restored_epoch is None else min(first, restored_epoch + 1)
                replan = True
            elif first > (position + 1 if position is not None else 0):
                expected = self.d.partitioning.key(position + 1 if position is not None else 0)
                raise PipelineError(
                    f"cannot start at {from_}: the state is at "
                    f"{self.d.partitioning.key(position) if position is not None else 'the beginning'}; "
                    f"run from {expected} first (epochs run in order)"
                )
        else:
            first = (position + 1) if position is not None else 0
        last = self._last_epoch(to, now)
        latest = self.d.coordinator.store.latest()
        self._last_checkpoint_epoch = None if latest is None else int(latest.metadata.epoch)
        if report.restored is not None:  # the state is at the restored epoch, whatever newer checkpoints exist
            self._last_checkpoint_epoch = report.restored["epoch"]
        elif self._last_checkpoint_epoch is not None and (first - 1) < self._last_checkpoint_epoch:
            # A savepoint (or checkpoint) ahead of the state, after a restore by another process:
            # the interval counts from the state's position.
            self._last_checkpoint_epoch = first - 1
        for epoch in range(first, last + 1):
            report.epochs.append(self.run_epoch(epoch, replan=replan))
        return report

    def _last_epoch(self, to: str | None, now: datetime | None) -> int:
        if to is not None:
            return self.d.partitioning.epoch(to)
        closed = self.d.partitioning.latest_closed_epoch(now or datetime.now(timezone.utc))
        return -1 if closed is None else closed

    def checkpoint_due(self, epoch: int) -> bool:
        if self._last_checkpoint_epoch is None:
            return (epoch + 1) % self.d.settings.checkpoints.interval_epochs == 0
        return epoch - self._last_checkpoint_epoch >= self.d.settings.checkpoints.interval_epochs

    # -- one epoch ---------------------------------------------------------------------------

    @leased("run")
    def run_epoch(self, epoch: int, *, replan: bool = False, force_checkpoint: bool = False) -> EpochReport:
        """Run one epoch as one transaction (:class:`epochal.pipeline.epoch.EpochTransaction`)."""
        started = time.monotonic()
        report = EpochReport(epoch, self.d.partitioning.info(epoch).partition, 0.0)
        checkpoint = force_checkpoint or self.checkpoint_due(epoch)
        EpochTransaction(self.d, epoch, report, checkpoint=checkpoint, replan=replan).run()
        if report.checkpoint_status == "completed":
            self._last_checkpoint_epoch = epoch
        report.duration_s = round(time.monotonic() - started, 3)
        if self.on_epoch:
            self.on_epoch(report)
        return report

    # -- retention, restore, savepoints -------------------------------------------------------

    def _recover_before_run(self, from_: str | None) -> tuple[dict[str, Any] | None, bool]:
        """Restore first if the last run or restore died (or the run position file is gone); return
        what was restored, and whether it was ``from_``'s backfill restore (the way out when none after is usable)."""
        progress = self.d.progress.load()
        backfill = None if from_ is None else self.d.partitioning.epoch(from_)
        if not progress.clean and backfill is not None and backfill <= progress.in_flight:
            log.warning("the last run or restore did not finish; the backfill from %s restores first", from_)
            return self.restore_before(backfill), True
        if not progress.clean:
            return self.recover(progress), False
        if not self.d.progress.exists() and self.d.coordinator.store.latest() is not None:
            log.warning("the run position file %s is missing while checkpoints exist: restoring the latest completed "
                        "checkpoint (state and sinks), as after a crash", self.d.storage.child("progress.json"))
            return self.restore(), False
        return None, False

    def recover(self, progress) -> dict[str, Any]:
        """After a run that died mid-epoch, or a restore that died half-way: restore again."""
        target = progress.restoring
        if target is None:
            log.warning("the last run died in epoch %s: restoring the latest completed checkpoint", progress.in_progress)
            # Never forward: a savepoint of a later epoch (kept after an older restore) is not where the state was.
            return self.restore(max_epoch=progress.in_progress)
        log.warning("the last restore (%s) did not finish: doing it again", json.dumps(target, sort_keys=True))
        if target.get("empty"):
            return self._restore_empty()
        return self.restore(
            target.get("pointer"), parallelism=target.get("parallelism"),
            allow_non_restored_state=bool(target.get("allow_non_restored_state", False)),
        )

    @leased("restore")
    def restore(
        self,
        pointer: str | int | None = None,
        *,
        parallelism: int | None = None,
        max_epoch: int | None = None,
        allow_non_restored_state: bool = False,
    ) -> dict[str, Any]:
        """Restore state and sinks to a checkpoint (latest usable when None) or a savepoint.

        Every handle is checked before anything changes; a latest checkpoint that is
        corrupt or incomplete is skipped with a warning naming it (see ``epochal.state.recovery.restore``).
        ``max_epoch`` bounds the latest (crash recovery never restores a later epoch than
        the one in flight). ``progress.json`` records the restore before it changes
        anything, so a restore that dies half-way is done again by the next run.
        ``allow_non_restored_state`` (Flink's ``--allowNonRestoredState``): state in the
        checkpoint that no stage declares any more (a stage removed) is dropped instead of refused.
        """
        from epochal.state.recovery.restore import restore_state

        position = self._sinks_position()

        def record(chosen: str | None) -> None:  # checked, nothing changed yet
            target = {"empty": True} if chosen is None else {
                "pointer": chosen, "parallelism": parallelism, "allow_non_restored_state": allow_non_restored_state,
            }
            self.d.progress.restoring(target, last_done_epoch=position)

        result = restore_state(
            self.d.spark, self.d.coordinator, pointer, targets=self._targets(),
            working_root=self.d.shared_root, parallelism=parallelism, max_epoch=max_epoch, before_changes=record,
            allow_non_restored_state=allow_non_restored_state,
        )
        crashpoint("in_restore", None if result.started_empty else int(result.epoch))
        self._reset_backends()
        epoch = None if result.started_empty else int(result.epoch)
        self._drop_checkpoints_after(epoch)
        by_content = self._rewind_sinks(epoch, result.sinks)
        if parallelism is not None:  # a rescale: the pipeline runs with it from now on (recorded with the position)
            self.d.parallelism = parallelism
        self.d.progress.reset(epoch, parallelism=parallelism)
        if gap := forward_gap({n: self.d.sinks[n] for n in by_content}, position, epoch):
            log.warning("%s", gap)
        return {
            "sink_gap": gap,
            "checkpoint_id": None if result.started_empty else int(result.checkpoint_id),
            "kind": None if result.started_empty else result.kind.value,
            "epoch": epoch,
            "partition": None if epoch is None else self.d.partitioning.key(epoch),
            "metadata_path": result.metadata_path,
            "parallelism": parallelism or self.d.parallelism,
            "skipped": [s.model_dump(mode="json") for s in result.skipped],
        }

    def _targets(self):
        from epochal.state.recovery.restore import StateTarget

        targets = []
        for stage in self.d.pipeline.stages:
            targets += [StateTarget.keyed(self.d.keyed[stage.name], desc) for desc in stage.keyed_state]
            targets += [StateTarget.operator(self.d.operator[stage.name], desc) for desc in stage.operator_state]
        return targets

    def _reset_backends(self) -> None:
        for backend in list(self.d.keyed.values()) + list(self.d.operator.values()):
            backend._opened.clear()

    def restore_before(self, epoch: int) -> dict[str, Any]:
        """Restore the newest checkpoint or savepoint whose epoch is before ``epoch`` (empty state if none)."""
        candidates = [c for c in self.d.coordinator.store.all() if int(c.metadata.epoch) < epoch]
        if not candidates:
            if epoch == 0:
                return self._restore_empty()
            raise PipelineError(
                f"no checkpoint or savepoint before partition {self.d.partitioning.key(epoch)} to restore; "
                f"backfill from {self.d.partitioning.key(0)} instead"
            )
        return self._restore_newest(sorted(candidates, key=lambda c: (int(c.metadata.epoch), int(c.checkpoint_id))))

    def _restore_newest(self, candidates: list[CompletedCheckpoint]) -> dict[str, Any]:
        """Restore the last usable of ``candidates``, skipping broken ones with a warning naming each."""
        import warnings

        from epochal.state.errors import CheckpointNotRestorable, RestoreFallbackWarning

        skipped: list[str] = []
        for entry in reversed(candidates):
            try:
                return self.restore(int(entry.checkpoint_id))
            except CheckpointNotRestorable as exc:
                skipped.append(f"checkpoint {int(entry.checkpoint_id)}: {exc.message}")
                warnings.warn(f"Skipping {skipped[-1]} Trying an older one.", RestoreFallbackWarning, stacklevel=3)
                log.warning("skipping %s", skipped[-1])
        raise PipelineError(f"no usable checkpoint or savepoint before the backfill's start ({'; '.join(skipped)})")

    def _sinks_position(self) -> int | None:
        """Where the sinks are (the last epoch done), None if unknown."""
        try:
            return self.d.progress.load().last_done_epoch
        except PipelineError:  # a corrupt position file: restore rewrites it
            return None

    def _restore_empty(self) -> dict[str, Any]:
        """Empty state (a backfill from the first partition); the tables keep their history."""
        from epochal.state.recovery.restore import reset_to_empty

        self.d.progress.restoring({"empty": True}, last_done_epoch=self._sinks_position())
        reset_to_empty(self.d.spark, self.d.storage, targets=self._targets(), working_root=self.d.shared_root)
        self._reset_backends()
        self._drop_checkpoints_after(None)
        self._rewind_sinks(None)
        self.d.progress.reset(None)
        return {"checkpoint_id": None, "kind": None, "epoch": None, "partition": None}

    def _drop_checkpoints_after(self, epoch: int | None) -> None:
        """Remove retained checkpoints of epochs after the restored one (before the sinks are rewound).

        Rewinding drops the append sinks' rows of those epochs, so restoring such a
        checkpoint later (a crash before the replay checkpoints again, a skipped
        checkpoint readable again) would lose them. Savepoints are kept.
        """
        store = self.d.coordinator.store
        for entry in store.all():
            if not entry.is_savepoint and (epoch is None or int(entry.metadata.epoch) > epoch):
                log.warning("removing checkpoint %s (epoch %s): the state and the sinks were rewound to %s",
                            int(entry.checkpoint_id), int(entry.metadata.epoch), epoch)
                store.remove(int(entry.checkpoint_id))

    def _rewind_sinks(self, epoch: int | None, positions=()) -> list[str]:
        """Bring every sink back to ``epoch``: to its recorded version, else by content; return the latter's names."""
        d = self.d
        producers = {s.name: s for s in d.pipeline.stages}
        recorded = {p.sink: p for p in positions}
        by_content = []
        for name, sink in d.sinks.items():
            if epoch is not None and sink.restore_version(recorded.get(name)):
                continue
            by_content.append(name)
            if sink.spec.mode is SinkMode.APPEND:
                sink.rewind(epoch)
                continue
            stage_name, _, output = sink.spec.input.partition(".")
            stage = producers[stage_name]
            view = None
            if epoch is not None and hasattr(stage, "view"):
                view = stage.view(d.context(stage, epoch), output or stage.outputs[0])
            elif epoch is not None:
                log.warning("sink %s: the restored checkpoint holds no version of it to restore, and stage %s has no "
                            "view() to rebuild it from: it starts empty", name, stage_name)
            sink.rewind(epoch, view)
        return by_content

    @leased("savepoint")
    def savepoint(self, name: str | None = None) -> dict[str, Any]:
        """Take a savepoint of the state at its current position (a self-contained copy)."""
        return take_savepoint(self, name)
