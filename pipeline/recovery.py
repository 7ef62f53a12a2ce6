"""Recovery and restore, in one place, with typed results (:class:`Restored`).

- :meth:`Recovery.before_run`: what a run does first: after a run that died mid-epoch
  (``progress.json`` has an epoch in progress) the latest completed checkpoint is restored,
  never one of a later epoch; after a restore that died half-way, that restore is done again;
  with the run position file gone while checkpoints exist, the latest is restored.
- :meth:`Recovery.restore`: state and sinks back to a checkpoint or savepoint (the latest
  usable when none is named), optionally at another parallelism (a rescale, kept from then
  on). Every handle is checked before anything changes; ``progress.json`` records the
  choice first, so a restore that dies is done again by the next run. Then the checkpoints
  of later epochs are dropped and each sink goes back to the Delta version the checkpoint
  recorded (by content only when that version cannot be restored).
- :meth:`Recovery.restore_before`: a backfill's restore (the newest before an epoch).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from epochal.pipeline.deployment import Deployment
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.faults import crashpoint
from epochal.pipeline.lease import leased
from epochal.pipeline.sinks import forward_gap
from epochal.pipeline.stage import SinkMode
from epochal.state.checkpoint import CompletedCheckpoint
from epochal.state.checkpoint.lineage import Lineage, describe
from epochal.state.delta.paths import to_url
from epochal.state.errors import UnclaimedStateError

log = logging.getLogger("epochal.recovery")


@dataclass(frozen=True)
class Restored:
    """What a restore did (``epochal restore --json`` prints it; a run reports the one it did first)."""

    checkpoint_id: int | None
    kind: str | None  # "checkpoint", "savepoint", or None: empty state
    epoch: int | None
    partition: str | None
    metadata_path: str | None = None
    parallelism: int | None = None
    #: Checkpoints skipped as unusable (corrupt or incomplete), newest first.
    skipped: tuple[dict[str, Any], ...] = ()
    #: Sinks brought back to the version the checkpoint recorded, and those rewound by content.
    sinks_by_version: tuple[str, ...] = ()
    sinks_by_content: tuple[str, ...] = ()
    #: What append sinks rewound by content lack after a restore ahead of them (see ``forward_gap``).
    sink_gap: str | None = None
    #: States whose schema the restore migrated: ``stage/state: the columns added``.
    migrated: tuple[str, ...] = ()
    #: States of the snapshot that no stage declares any more, dropped (``--allow-non-restored-state``).
    dropped: tuple[str, ...] = ()

    @property
    def started_empty(self) -> bool:
        return self.checkpoint_id is None

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in document.items()}


class Recovery:
    """Restores of one deployment (the runner's, holding its lease)."""

    def __init__(self, deployment: Deployment) -> None:
        self.d = deployment

    def before_run(self, from_: str | None) -> tuple[Restored | None, bool]:
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
            return self.restore(checkpoints_first=False), False
        return None, False

    def recover(self, progress) -> Restored:
        """After a run that died mid-epoch, or a restore that died half-way: restore again."""
        target = progress.restoring
        if target is None:
            log.warning("the last run did not finish epoch %s (it died or failed): restoring the latest completed "
                        "checkpoint", progress.in_progress)
            # Never forward: a savepoint of a later epoch (kept after an older restore) is not where the state was.
            try:
                return self.restore(max_epoch=progress.in_progress, checkpoints_first=False)
            except UnclaimedStateError as exc:  # refused while choosing: nothing changed
                checkpoint_id = exc.context.get("checkpoint_id")
                if checkpoint_id is None or not self._dropped_before(int(checkpoint_id)):
                    raise
                log.warning("restoring checkpoint %s with --allow-non-restored-state, as the restore that started the "
                            "state's history did: %s", checkpoint_id, exc.message)
                return self.restore(max_epoch=progress.in_progress, checkpoints_first=False, allow_non_restored_state=True)
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
        checkpoints_first: bool = True,
    ) -> Restored:
        """Restore state and sinks to a checkpoint (latest usable when None) or a savepoint.

        Without a pointer: the latest completed checkpoint, as Flink restarts (the newest savepoint only if no
        checkpoint is retained or usable); ``checkpoints_first=False`` takes the newest of either (a crash's
        recovery: the state was where the newest of them left it).

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
            self.d.spark, self.d.coordinator, pointer, targets=self.targets(),
            working_root=self.d.shared_root, parallelism=parallelism, max_epoch=max_epoch, before_changes=record,
            checkpoints_first=checkpoints_first,
            allow_non_restored_state=allow_non_restored_state, fence=self.d.fence,
        )
        crashpoint("in_restore", None if result.started_empty else int(result.epoch))
        self._reset_backends()
        epoch = None if result.started_empty else int(result.epoch)
        self._drop_checkpoints_after(epoch)
        by_content = self._rewind_sinks(epoch, result.sinks)
        self._record_history(epoch, None if result.started_empty else self._local_id(result), allow_non_restored_state)
        if parallelism is not None:  # a rescale: the pipeline runs with it from now on (recorded with the position)
            self.d.parallelism = parallelism
        self.d.progress.reset(epoch, parallelism=parallelism)
        self.d.coordinator.failures.reset()  # a restart from a checkpoint is the recovery of a failed pipeline
        if gap := forward_gap({n: self.d.sinks[n] for n in by_content}, position, epoch):
            log.warning("%s", gap)
        return self._restored(result, by_content, gap)

    def _restored(self, result, by_content: list[str], gap: str | None) -> Restored:
        """What a restore did, as the commands and Dagster report it (the parallelism it runs with from now on)."""
        epoch = None if result.started_empty else int(result.epoch)
        return Restored(
            checkpoint_id=None if result.started_empty else int(result.checkpoint_id),
            kind=None if result.started_empty else result.kind.value,
            epoch=epoch,
            partition=None if epoch is None else self.d.partitioning.key(epoch),
            metadata_path=result.metadata_path,
            parallelism=self.d.parallelism,
            skipped=tuple(s.model_dump(mode="json") for s in result.skipped),
            sinks_by_version=tuple(n for n in self.d.sinks if n not in by_content),
            sinks_by_content=tuple(by_content),
            sink_gap=gap,
            migrated=tuple(f"{st.key}: {', '.join(st.migrated_columns)}" for st in result.states if st.migrated_columns),
            dropped=tuple(result.not_restored),
        )

    def targets(self):
        """The states the current code declares, each with its working table (a restore's targets)."""
        from epochal.state.recovery.restore import StateTarget

        targets = []
        for stage in self.d.pipeline.stages:
            targets += [StateTarget.keyed(self.d.keyed[stage.name], desc) for desc in stage.keyed_state]
            targets += [StateTarget.operator(self.d.operator[stage.name], desc) for desc in stage.operator_state]
        return targets

    def _reset_backends(self) -> None:
        for backend in list(self.d.keyed.values()) + list(self.d.operator.values()):
            backend._opened.clear()

    def restore_before(self, epoch: int) -> Restored:
        """Restore the newest checkpoint or savepoint whose epoch is before ``epoch`` (empty state if none)."""
        candidates = self.candidates_before(epoch)
        if not candidates:
            return self._restore_empty()
        return self._restore_newest(candidates)

    def candidates_before(self, epoch: int) -> list[CompletedCheckpoint]:
        """The retained checkpoints and savepoints a backfill from ``epoch`` can restore, oldest first; refused when
        there are none and ``epoch`` is not the first (read from the store's Delta log: no JVM needed). Those off
        the state's history (taken before a later restore rewound past them) are never chosen: restoring one would
        bring back a state without the replay's rows (:mod:`epochal.state.checkpoint.lineage`)."""
        retained = sorted(self.d.coordinator.store.all(), key=lambda c: (int(c.metadata.epoch), int(c.checkpoint_id)))
        retained, off = Lineage(self.d.storage).split(retained, "before a backfill")
        candidates = [c for c in retained if int(c.metadata.epoch) < epoch]
        if not candidates and epoch != 0:
            key = self.d.partitioning.key
            passed = [describe(c) for c in off if int(c.metadata.epoch) < epoch]
            why = (f" ({', '.join(passed)} {'is' if len(passed) == 1 else 'are'} off the state's history: a later "
                   "restore rewound past it and the epochs after that were run again; restore one by name or id to "
                   "go back to that history)") if passed else ""
            raise PipelineError(
                f"no checkpoint or savepoint before partition {key(epoch)} is retained{why}.",
                action=f"backfill from {_earliest_starts(retained, key)} instead",
                partition=key(epoch),
            )
        return candidates

    def _restore_newest(self, candidates: list[CompletedCheckpoint]) -> Restored:
        """Restore the last usable of ``candidates``, skipping broken ones with a warning naming each."""
        import warnings

        from epochal.state.errors import CheckpointNotRestorable, RestoreFallbackWarning

        skipped: list[str] = []
        for entry in reversed(candidates):
            try:
                return self.restore(int(entry.checkpoint_id),
                                    allow_non_restored_state=self._dropped_before(int(entry.checkpoint_id)))
            except CheckpointNotRestorable as exc:
                skipped.append(f"{describe(entry)}: {exc.message}")
                warnings.warn(f"Skipping {skipped[-1]} Trying an older one.", RestoreFallbackWarning, stacklevel=3)
                log.warning("skipping %s", skipped[-1])
        raise PipelineError(
            f"no usable checkpoint or savepoint before the backfill's start ({'; '.join(skipped)})",
            action=f"backfill from the first partition ({self.d.partitioning.key(0)}: empty state, every epoch run "
                   "again), or restore another checkpoint or savepoint by id or name (`epochal checkpoints list`)",
        )

    def _sinks_position(self) -> int | None:
        """Where the sinks are (the last epoch done), None if unknown."""
        try:
            return self.d.progress.load().last_done_epoch
        except PipelineError:  # a corrupt position file: restore rewrites it
            return None

    def _restore_empty(self) -> Restored:
        """Empty state (a backfill from the first partition); the tables keep their history."""
        from epochal.state.recovery.restore import reset_to_empty

        self.d.progress.restoring({"empty": True}, last_done_epoch=self._sinks_position())
        reset_to_empty(self.d.spark, self.d.storage, targets=self.targets(), working_root=self.d.shared_root,
                       fence=self.d.fence)
        self._reset_backends()
        self._drop_checkpoints_after(None)
        self._rewind_sinks(None)
        self._record_history(None, None)
        self.d.progress.reset(None)
        return Restored(checkpoint_id=None, kind=None, epoch=None, partition=None, parallelism=self.d.parallelism,
                        sinks_by_content=tuple(self.d.sinks))

    def _record_history(self, epoch: int | None, restored: int | None, allow_non_restored_state: bool = False) -> None:
        """The restore in the state's history (:mod:`epochal.state.checkpoint.lineage`), before the run position
        says it is done: a restore that dies before it is done again, and recorded then."""
        Lineage(self.d.storage, self.d.fence).record(after=self.d.coordinator.last_claimed_id(), epoch=epoch,
                                                     restored=restored, allow_non_restored_state=allow_non_restored_state)

    def _dropped_before(self, checkpoint_id: int) -> bool:
        """Whether the restore that started the state's current history dropped the state no stage declares
        (``--allow-non-restored-state``) and ``checkpoint_id`` was taken before it: a recovery after a crash, or a
        backfill, that restores it drops the same state again, as Flink's failover keeps the job's restore settings.
        Found from outside (probe 15): a crash in the first epoch after such a restore left every later run refused
        ("holds state ... that no current state descriptor claims") until the restore was repeated by hand."""
        records = Lineage(self.d.storage).load()
        return bool(records) and records[-1].allow_non_restored_state and checkpoint_id <= records[-1].after

    def _local_id(self, result) -> int | None:
        """The restored snapshot's id if it is one of this storage's (else a savepoint of another deployment)."""
        entry = self.d.coordinator.store.get(int(result.checkpoint_id))
        if entry is None or to_url(entry.metadata_path) != to_url(result.metadata_path):
            return None
        return int(result.checkpoint_id)

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
                            int(entry.checkpoint_id), int(entry.metadata.epoch),
                            "empty state" if epoch is None else f"epoch {epoch}")
                self.d.fence(f"remove checkpoint {int(entry.checkpoint_id)}")
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


def _earliest_starts(retained: list[CompletedCheckpoint], key) -> str:
    """Where a backfill can start: the partition after the oldest retained checkpoint or savepoint (``retained``,
    oldest first), or the first partition, from empty state; ``key`` names an epoch's partition."""
    empty = f"{key(0)} (from empty state)"
    if not retained:
        return empty
    oldest = retained[0]
    kind = "savepoint" if oldest.is_savepoint else "checkpoint"
    epoch = int(oldest.metadata.epoch)
    return (f"{key(epoch + 1)} (after {kind} {int(oldest.checkpoint_id)} of partition {key(epoch)}, the oldest "
            f"retained) or from {empty}")
