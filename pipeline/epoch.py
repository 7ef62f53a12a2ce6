"""One epoch as one transaction (DESIGN section 3), and a savepoint as the same transaction without data.

:class:`EpochTransaction` has one named call per step, in this order::

    begin -> plan -> process -> snapshot_and_ack -> write_sinks -> complete -> retain -> done

``begin`` marks the epoch in progress (``progress.json``) and triggers a checkpoint when
one is due; ``plan`` fixes (and records) what each source reads, and by its size whether Spark
generates code for the epoch or interprets it; ``process`` runs the stages
in DAG order; ``snapshot_and_ack`` calls each stage's ``snapshot_state``, writes its changed
operator state and acknowledges its state handles; ``write_sinks`` writes each sink
idempotently and acknowledges its table version (the sink's pre-commit); ``complete`` is
an explicit call to the coordinator (``_metadata``, then the store commit), never a side
effect of the last ack (the commit, each sink write and each state write are fenced: a
process whose lease was taken over gets ``FencedError`` before it writes, and does not abort); ``retain`` drops subsumed checkpoints; ``done`` moves the run
position. A failure between ``begin`` and ``complete`` aborts the pending checkpoint.

:class:`SavepointTransaction` shares ``snapshot_and_ack``, the sinks' acks and ``complete``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Iterable

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from epochal.config import CheckpointMode
from epochal.errors import EpochalError
from epochal.pipeline.errors import PipelineError, SinkError, StageError
from epochal.pipeline.faults import crashpoint
from epochal.pipeline.lease import LeaseLost
from epochal.pipeline.sources import (SourceBatch, batch_from_position, check_unchanged, planned_bytes, record_fingerprints,
                                      refuse_missing)
from epochal.pipeline.stage import Stage
from epochal.pipeline.steps import StepClock
from epochal.state.backends.operator import FunctionSnapshotContext, OperatorStateStore, initialize_function
from epochal.state.checkpoint import CompletedCheckpoint
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.retention import release_subsumed
from epochal.state.handles import StateHandle
from epochal.state.epoch_conf import checksum_files, code_generation, join_strategy

if TYPE_CHECKING:
    from epochal.pipeline.deployment import Deployment
    from epochal.pipeline.runner import EpochReport

log = logging.getLogger("epochal.epoch")


class _CheckpointingTransaction:
    """What epochs and savepoints share: acknowledging state and sinks, and completing explicitly."""

    def __init__(self, d: Deployment, epoch: int) -> None:
        self.d = d
        self.epoch = epoch
        self.pending = None
        self.completion = None

    def _ack(self, task: str, handles: Iterable[StateHandle] = (), sinks=()) -> None:
        if len(self.pending.not_yet_acknowledged) == 1:
            crashpoint("after_last_ack", self.epoch)
        self.d.coordinator.acknowledge(
            self.pending.checkpoint_id, task, self.epoch, list(handles), sinks, complete_when_acknowledged=False
        )

    def _ack_stage(self, stage: Stage, store: OperatorStateStore) -> None:
        self._ack(f"stage:{stage.name}", self._handles(stage, store))

    def _ack_sink(self, name: str) -> None:
        self._ack(f"sink:{name}", sinks=(self.d.sinks[name].position(),))

    def _handles(self, stage: Stage, store: OperatorStateStore) -> list[StateHandle]:
        retained = self.d.coordinator.store.all()[::-1]  # newest first
        handles = [_written_since(retained, h) for h in self.d.state_handles(stage, store)]
        if self.pending.spec.mode is CheckpointMode.FULL or self.pending.spec.kind is CheckpointKind.SAVEPOINT:
            from epochal.state.checkpoint.snapshots import materialize_handles

            handles = materialize_handles(self.d.spark, self.d.storage, handles, self.pending)
        return handles

    def complete(self):
        """Complete the checkpoint once every task acknowledged (an explicit call to the coordinator)."""
        if self.pending is None:
            return None
        self.completion = self.d.coordinator.complete(self.pending.checkpoint_id)
        return self.completion

    def abort(self, exc: BaseException) -> None:
        from epochal.state.checkpoint import CheckpointFailureReason

        if self.pending is None:
            return
        if isinstance(exc, LeaseLost):  # fenced off: the abort is a write too (stats, failure count); the newer
            return  # holder finds this pending checkpoint abandoned, as after a crash
        try:
            self.d.fence(f"abort checkpoint {self.pending.checkpoint_id}")
            self.d.coordinator.abort(
                self.pending.checkpoint_id, CheckpointFailureReason.TASK_FAILURE, f"{type(exc).__name__}: {exc}"
            )
        except LeaseLost:  # lost meanwhile: the same
            log.warning("not aborting checkpoint %s: this process's lease was taken over", self.pending.checkpoint_id)
        except Exception:  # noqa: BLE001 - never hide the original failure
            log.exception("aborting checkpoint %s failed", self.pending.checkpoint_id)


class EpochTransaction(_CheckpointingTransaction):
    """One epoch: every step a named call (see the module docstring)."""

    def __init__(
        self, d: Deployment, epoch: int, report: EpochReport, *, checkpoint: bool, replan: bool, checksums: bool = True
    ) -> None:
        super().__init__(d, epoch)
        self.report = report
        self.checkpoint = checkpoint
        self.replan = replan
        self.checksums = checksums
        self.outputs: dict[str, Any] = {}
        self.stores: dict[str, OperatorStateStore] = {}
        self._persisted: list[DataFrame] = []
        self._scope = contextlib.ExitStack()  # the epoch's Spark settings, put back when it ends

    def run(self) -> EpochReport:
        with StepClock(self.d.spark, self.epoch, self.report.partition, self.report.steps) as self.clock:
            with self.clock.step("begin"):
                self.begin()
            try:
                with self.clock.step("plan"):
                    self.plan()
                self.process()
                self.snapshot_and_ack()
                self.write_sinks()
                with self.clock.step("complete"):
                    self.complete()
            except BaseException as exc:
                self.abort(exc)
                raise
            finally:
                for df in self._persisted:
                    df.unpersist()
                self._scope.close()
            with self.clock.step("retain"):
                self.retain()
            with self.clock.step("done"):
                self.done()
            self.report.spark_jobs = self.clock.count_jobs()
            self.report.compiled_classes = sum(entry.get("compiled", 0) for entry in self.clock.steps.values())
        return self.report

    # -- the steps ---------------------------------------------------------------------------

    def begin(self) -> None:
        """Mark the epoch in progress; trigger a checkpoint when one is due."""
        self.d.progress.start(self.epoch)
        if self.checkpoint:
            self.pending = self._trigger()
        crashpoint("after_trigger", self.epoch)

    def plan(self) -> None:
        """Fix what each source reads this epoch (recorded before reading; a replay reads the record), then
        choose generated code or interpreted expressions by the size of the epoch's data."""
        sizes = []
        for source in self.d.pipeline.sources:
            self.outputs[source.name], size = self._plan(source)
            sizes.append(size)
            if self.pending is not None:  # the checkpoint records the source's own position (``checkpoints inspect``)
                self.pending.record_source_position(source.name, self.outputs[source.name].position)
        self.report.input_bytes = None if None in sizes else sum(sizes)
        latest = self.d.coordinator.store.latest()
        state_bytes = latest.metadata.state_bytes if latest else 0
        data = None if self.report.input_bytes is None else self.report.input_bytes + state_bytes
        self.report.code = self._scope.enter_context(code_generation(self.d.spark, self.d.settings.spark, data))
        self.report.joins = self._scope.enter_context(join_strategy(self.d.spark, self.d.settings.spark, data))
        self.report.checksums = self._scope.enter_context(checksum_files(self.d.spark, self.d.settings.spark, self.checksums))
        crashpoint("after_plan", self.epoch)

    def process(self) -> None:
        """Run the stages in DAG order; each writes its keyed state as it goes."""
        for stage in self.d.pipeline.ordered_stages:
            with self.clock.step(f"stage:{stage.name}"):
                self._process(stage)
            self.report.stages[stage.name] = {"duration_s": self.report.steps[f"stage:{stage.name}"]["s"]}

    def snapshot_and_ack(self) -> None:
        """Per stage: ``snapshot_state``, write its changed operator state, acknowledge its handles."""
        for stage in self.d.pipeline.ordered_stages:
            with self.clock.step(f"state:{stage.name}"):
                self._snapshot_stage(stage, self.stores[stage.name])

    def _snapshot_stage(self, stage: Stage, store: OperatorStateStore) -> None:
        with self._user_code(stage):  # snapshot_state, and the frames it gave update() computed by the flush
            if hasattr(stage, "snapshot_state"):
                checkpoint_id = self.pending.checkpoint_id if self.pending else None
                stage.snapshot_state(FunctionSnapshotContext(checkpoint_id, self.epoch))
            store.flush()
        crashpoint("after_state_write", self.epoch)
        if self.pending is not None:
            self._ack_stage(stage, store)

    def write_sinks(self) -> None:
        """Write each sink idempotently, then acknowledge its table version."""
        for name, sink in self.d.sinks.items():
            crashpoint("in_sink", self.epoch)
            with self.clock.step(f"sink:{name}"):
                try:
                    rows = sink.write(self.outputs[sink.spec.input], self.epoch, partition=self.d.partitioning.key(self.epoch))
                except EpochalError:
                    raise
                except Exception as exc:  # noqa: BLE001 - where a stage's lazy output is computed: say where
                    raise SinkError(name, self.epoch, self.d.partitioning.key(self.epoch), exc,
                                    self.d.pipeline.computed_from([sink.spec.input])) from exc
                if self.pending is not None:
                    self._ack_sink(name)
            entry = self.report.sinks[name] = {"duration_s": self.report.steps[f"sink:{name}"]["s"], "table": sink.path}
            if rows is not None:
                self.report.sink_rows[name] = entry["rows_written"] = rows

    def complete(self):
        completion = super().complete()
        if completion is not None:
            self._report_completion(completion)
        return completion

    def retain(self) -> None:
        """Drop the checkpoints the one just completed subsumes, and the files only they needed."""
        if self.completion is None or not self.completion.succeeded:
            return
        crashpoint("in_retention", self.epoch)
        self.d.fence(f"release the checkpoints subsumed by checkpoint {self.completion.checkpoint_id}")
        release_subsumed(self.d.spark, self.d.coordinator.store, self.d.storage,
                         cleanup_delay_s=self.d.settings.checkpoints.cleanup_delay_s)
        self.d.prune_plans()

    def done(self) -> None:
        """The epoch's every write is done: move the run position."""
        self.d.progress.done(self.epoch)
        crashpoint("after_epoch", self.epoch)

    # -- helpers -----------------------------------------------------------------------------

    def _trigger(self):
        d, report = self.d, self.report
        positions = {s.name: {"epoch": self.epoch, "partition": d.partitioning.key(self.epoch)} for s in d.pipeline.sources}
        result = d.coordinator.trigger(self.epoch, d.pipeline.tasks, positions, max_parallelism=d.pipeline.max_parallelism)
        if not result.triggered:
            report.checkpoint_status = "declined"
            report.checkpoint_detail = result.reason.name if result.reason else None
            log.warning("checkpoint for epoch %s declined: %s", self.epoch, report.checkpoint_detail)
            return None
        report.checkpoint_id = int(result.checkpoint_id)
        return result.pending

    def _plan(self, source) -> tuple[SourceBatch, int | None]:
        """The source's batch for this epoch and its planned bytes (None: not known)."""
        storage = self.d.storage
        path = self.d.plan_path(source.name, self.epoch)
        if not self.replan and storage.exists(path):
            position = json.loads(storage.read(path))
            key = self.d.partitioning.key(self.epoch)
            check_unchanged(source.name, position, epoch=self.epoch, partition=key)
            return batch_from_position(source.name, position, key), planned_bytes(position)
        batch = source.plan(self.d.partitioning.info(self.epoch))
        recorded = record_fingerprints(batch)
        refuse_missing(batch, recorded)
        self.d.fence(f"record the plan of source {source.name} for epoch {self.epoch}")
        storage.write_atomic(path, json.dumps(recorded, sort_keys=True).encode())
        return batch, planned_bytes(recorded)

    def _process(self, stage: Stage) -> None:
        d = self.d
        store = self.stores[stage.name] = OperatorStateStore(d.operator[stage.name], d.parallelism)
        ctx = d.context(stage, self.epoch, store)
        if hasattr(stage, "initialize_state"):
            with self._user_code(stage):
                initialize_function(stage, store, is_restored=self.epoch > 0, keyed=ctx.keyed)
        inputs = {ref: self.outputs[ref] for ref in stage.inputs}
        if d.inspector is not None:
            d.inspector.enter(stage.name, stage.inputs)
        crashpoint("in_stage", self.epoch)
        try:
            produced = _outputs_of(stage, stage.process(ctx, inputs))
        except PipelineError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user-code boundary
            raise StageError(stage.name, self.epoch, ctx.partition, exc, d.pipeline.computed_from(stage.inputs)) from exc
        self._check_sink_inputs(stage, produced)
        for out, frame in produced.items():
            ref = f"{stage.name}.{out}"
            if d.inspector is not None:
                d.inspector.see(stage.name, f"output {out}", frame)
            if isinstance(frame, DataFrame) and d.pipeline.readers(stage, out) > 1:
                frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                self._persisted.append(frame)
            self.outputs[ref] = frame
            if len(stage.outputs) == 1:
                self.outputs[stage.name] = frame

    @contextlib.contextmanager
    def _user_code(self, stage: Stage):
        """A stage's own hooks (``initialize_state``, ``snapshot_state``): an error names the stage, the epoch and
        the user's file and line, as one in ``process`` does."""
        try:
            yield
        except EpochalError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user-code boundary
            partition = self.d.partitioning.key(self.epoch)
            raise StageError(stage.name, self.epoch, partition, exc, self.d.pipeline.computed_from(stage.inputs)) from exc

    def _check_sink_inputs(self, stage: Stage, produced: dict) -> None:
        """Each sink fed by this stage gets the columns it writes: said now, not after the other stages ran."""
        refs = {f"{stage.name}.{out}": out for out in stage.outputs}
        if len(stage.outputs) == 1:
            refs[stage.name] = stage.outputs[0]
        for name, sink in self.d.sinks.items():
            if sink.spec.input in refs:
                try:
                    sink.check_input(produced[refs[sink.spec.input]])
                except ValueError as exc:
                    raise SinkError(name, self.epoch, self.d.partitioning.key(self.epoch), exc) from exc

    def _report_completion(self, completion) -> None:
        report = self.report
        if not completion.succeeded:
            report.checkpoint_status = "failed"
            report.checkpoint_detail = None if completion.failure is None else str(completion.failure.reason.name)
            return
        meta = completion.completed.metadata
        report.checkpoint_status = "completed"
        report.state_rows, report.state_bytes, report.bytes_written = meta.state_rows, meta.state_bytes, meta.bytes_written
        report.metadata_path = completion.completed.metadata_path
        for handle in meta.handles:
            entry = report.stages.setdefault(handle.stage, {})
            entry["state_rows"] = entry.get("state_rows", 0) + handle.rows
            entry["state_bytes"] = entry.get("state_bytes", 0) + handle.bytes_total
            entry["bytes_written"] = entry.get("bytes_written", 0) + handle.bytes_added
            entry.setdefault("tables", {})[handle.state] = handle.table_path


class SavepointTransaction(_CheckpointingTransaction):
    """A savepoint of the state at its position (the last epoch done): trigger, snapshot and ack, complete."""

    def _recorded_position(self, source: str) -> dict[str, Any]:
        """The epoch and partition of the state's position, and the source's own position there where its plan
        is still recorded (an epoch's checkpoint records it as the source plans)."""
        d = self.d
        found = {"epoch": self.epoch, "partition": d.partitioning.key(self.epoch)}
        path = d.plan_path(source, self.epoch)
        if d.storage.exists(path):
            found["position"] = batch_from_position(source, json.loads(d.storage.read(path))).position
        return found

    def run(self, name: str | None) -> CompletedCheckpoint:
        d = self.d
        tasks = [f"stage:{s.name}" for s in d.pipeline.ordered_stages] + [f"sink:{n}" for n in d.sinks]
        positions = {s.name: self._recorded_position(s.name) for s in d.pipeline.sources}
        result = d.coordinator.trigger_savepoint(
            self.epoch, tasks, positions, name=name, max_parallelism=d.pipeline.max_parallelism
        )
        if not result.triggered:
            raise PipelineError(f"savepoint declined: {result.reason.name if result.reason else 'unknown'}")
        self.pending = result.pending
        # No abort on an error: as in Flink, a failed savepoint is not a checkpoint failure (it never fails the
        # pipeline); the pending savepoint dies with the process, and its marked folder is discarded later.
        for stage in d.pipeline.ordered_stages:
            crashpoint("in_savepoint", self.epoch)
            self._ack_stage(stage, OperatorStateStore(d.operator[stage.name], d.parallelism))
        for sink in d.sinks:  # the sinks are at the state's position: record their versions
            self._ack_sink(sink)
        completion = self.complete()
        if not completion.succeeded:
            detail = completion.failure.reason.name if completion.failure else "incomplete"
            raise PipelineError(f"savepoint {self.pending.spec.savepoint_name} failed: {detail}")
        return completion.completed


def _written_since(retained: list[CompletedCheckpoint], handle: StateHandle) -> StateHandle:
    """Bytes this checkpoint wrote for a table: every version since the newest retained checkpoint that
    references the same table (a savepoint's copy is another table), counting the commits the log still has."""
    from epochal.state.delta import io as delta_io

    handles = (e.metadata.handle(handle.stage, handle.state) for e in retained)
    since = next((h.version for h in handles if h is not None and h.table_path == handle.table_path), -1)
    if since >= handle.version:
        return handle.model_copy(update={"bytes_added": 0})
    total = delta_io.bytes_added_between(handle.table_path, since + 1, handle.version)
    return handle.model_copy(update={"bytes_added": total})


def _outputs_of(stage: Stage, produced) -> dict:
    """What ``stage.process`` returned, checked: a mapping with a DataFrame for each declared output."""
    if not isinstance(produced, Mapping):
        raise TypeError(f"process() returned {type(produced).__name__}; return {{output name: DataFrame}} "
                        f"for the stage's outputs {list(stage.outputs)}")
    produced = dict(produced)
    missing = [o for o in stage.outputs if o not in produced]
    if missing:
        raise ValueError(f"process() returned no {missing} (it returned {sorted(produced)}); return a DataFrame "
                         f"for each of the stage's outputs {list(stage.outputs)}")
    wrong = {o: type(f).__name__ for o, f in produced.items() if o in stage.outputs and not isinstance(f, DataFrame)}
    if wrong:
        raise TypeError(f"process() returned {wrong} for output(s) {sorted(wrong)}, not DataFrames")
    return produced
