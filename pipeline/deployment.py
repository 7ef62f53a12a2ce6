"""A configured deployment: Spark, checkpoint storage and coordinator, pipeline, state backends, sinks."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from epochal.config import Settings
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.errors import PartitionsChangedError, PipelineError
from epochal.pipeline.faults import crashpoint
from epochal.pipeline.lease import DeploymentLease
from epochal.pipeline.partitions import Partitioning
from epochal.pipeline.progress import ProgressStore
from epochal.pipeline.sinks import DeltaSink
from epochal.pipeline.stage import Stage, StageContext
from epochal.state.checkpoint import CheckpointCoordinator, SystemClock, create_coordinator
from epochal.state.delta.objectstore import check_buckets
from epochal.state.delta.paths import to_spark
from epochal.state.determinism import PlanInspector
from epochal.state.handles import StateHandle
from epochal.state.backends.keyed import KeyedStateBackend
from epochal.state.backends.operator import OperatorStateBackend, OperatorStateStore


log = logging.getLogger("epochal.deployment")


class CrashAwareCoordinator(CheckpointCoordinator):
    """The coordinator with the crash point between ``_metadata`` and the store commit."""

    def _commit(self, completed):  # type: ignore[override]
        crashpoint("after_metadata", int(completed.metadata.epoch))
        return super()._commit(completed)


def declared_states(pipeline: Pipeline) -> list[str]:
    """Every state the pipeline's stages declare, as ``stage/state`` (a checkpoint handle's key)."""
    return sorted(f"{stage.name}/{desc.name}" for stage in pipeline.stages
                  for desc in [*stage.keyed_state, *stage.operator_state])


class Deployment:
    """Everything one configured deployment needs: Spark, storage, coordinator, pipeline, sinks."""

    def __init__(self, settings: Settings, spark: SparkSession, pipeline: Pipeline, *, clock=None) -> None:
        self.settings = settings
        self.spark = spark
        self.pipeline = pipeline
        self.clock = clock or SystemClock()
        self.partitioning = Partitioning.from_settings(settings.partitions)
        self.coordinator = create_coordinator(
            settings.checkpoints, spark=spark, clock=self.clock, coordinator_cls=CrashAwareCoordinator
        )
        self.storage = self.coordinator.storage
        self._partitions_checked = False
        self.lease = DeploymentLease(self.storage, settings.checkpoints.lease_timeout_s, self.clock,
                                     preflight=self._before_first_write)
        self.coordinator.fence = self.fence  # the completion commit is fenced, and so is every write below
        self.progress = ProgressStore(self.storage, self.fence, declared_states(pipeline), self.partitioning.record())
        self.shared_root = to_spark(self.storage.shared_url)
        self.parallelism = self._recorded_parallelism() or settings.spark.parallelism
        warehouse = to_spark(settings.warehouse)
        sink_rewrite_below = int(settings.spark.sink_rewrite_below_mb * 1024 * 1024)
        self.sinks = {s.name: DeltaSink(spark, warehouse, s, self.fence, rewrite_below_bytes=sink_rewrite_below) for s in pipeline.sinks}
        rewrite_below = int(settings.spark.state_rewrite_below_mb * 1024 * 1024)
        self.keyed = {
            s.name: KeyedStateBackend(
                spark, self.shared_root, s.name, max_parallelism=pipeline.max_parallelism, rewrite_below_bytes=rewrite_below,
                declared=[d.name for d in s.keyed_state],
            )
            for s in pipeline.stages
        }
        self.operator = {s.name: OperatorStateBackend(spark, self.shared_root, s.name) for s in pipeline.stages}
        for backend in [*self.keyed.values(), *self.operator.values()]:
            backend.fence = self.fence
        #: Reads the plans of what the stages write (``epochal verify``): see :meth:`inspect_plans`.
        self.inspector: PlanInspector | None = None

    def inspect_plans(self, inspector: PlanInspector) -> None:
        """Have ``inspector`` read the plan of every stage output and state write from now on."""
        self.inspector = inspector
        for backend in [*self.keyed.values(), *self.operator.values()]:
            backend.inspector = inspector

    def _before_first_write(self) -> None:
        """The lease's preflight: what refuses a leased command (run, restore, savepoint) with nothing written."""
        self.check_locations()
        self.check_partitions()

    def check_partitions(self) -> None:
        """Refuse partitions other than those that numbered this deployment's epochs (recorded in ``progress.json``).

        Found from outside (probe 15): ``partitions.start`` moved two hours later and the next run went on from
        the state's epoch, now two hours later: two hours of input were never read, and a restore after the start
        was set back replayed source plans of the wrong windows. Flink refuses a changed max parallelism for the
        same reason: it renumbers what the state is keyed by."""
        if self._partitions_checked:  # once a process: `run` asks before its range check, the lease's preflight again
            return
        try:
            recorded = self.progress.load().partitions
        except PipelineError:  # a corrupt position file: a restore rewrites it, so it must not be refused here
            return
        configured = self.partitioning.record()
        if recorded is None or recorded == configured:
            self._partitions_checked = True
            return
        changed = ", ".join(f"{k} {recorded.get(k)} (now {configured[k]})" for k in configured if recorded.get(k) != configured[k])
        raise PartitionsChangedError(
            f"partitions changed since this deployment's epochs were numbered ({self.progress.path} records {changed}): "
            "epoch N is the Nth window from partitions.start, so the state, the sinks and the recorded source plans "
            "would be read against other windows; nothing was run or written",
            action=f"set partitions back to start: {recorded.get('start')}, granularity: {recorded.get('granularity')} "
                   "in the configuration; other partitions are a new deployment (another checkpoints.dir and warehouse)",
            recorded=recorded, configured=configured,
        )

    def check_locations(self) -> None:
        """Refuse a location whose object store's bucket does not exist or cannot be read, before the first write
        (the lease's): epochal never creates a bucket (:func:`epochal.state.delta.objectstore.check_buckets`)."""
        check_buckets({"checkpoints.dir": self.storage.base_url, "checkpoints.savepoints_dir": self.storage.savepoints_url,
                       "warehouse": self.settings.warehouse}, self.storage.storage_options)

    def fence(self, action: str) -> None:
        """Refuse ``action`` (a write) with :class:`epochal.pipeline.lease.FencedError` if this process's lease
        was taken over (a newer generation exists); see :meth:`DeploymentLease.check_fence`."""
        self.lease.check_fence(action)

    def _recorded_parallelism(self) -> int | None:
        """The parallelism a restore (``--parallelism``) set, which the configuration's does not override."""
        recorded = self.progress.recorded_parallelism()
        if recorded is not None and recorded != self.settings.spark.parallelism:
            log.info("running with parallelism %s (set by `epochal restore --parallelism`); the configuration's "
                     "spark.parallelism %s applies again only through `epochal restore --parallelism %s` (a restore without "
                     "--parallelism keeps %s)", recorded, self.settings.spark.parallelism, self.settings.spark.parallelism, recorded)
        return recorded

    def context(self, stage: Stage, epoch: int, store: OperatorStateStore | None = None) -> StageContext:
        info = self.partitioning.info(epoch)
        keyed = self.keyed[stage.name]
        keyed.begin_epoch(epoch, info.clock)
        store = store or OperatorStateStore(self.operator[stage.name], self.parallelism)
        return StageContext(
            self.spark, info, keyed, store, self.parallelism, {"settings": self.settings},
            unread=self.pipeline.unread_outputs(stage),
        )

    def plan_path(self, source: str, epoch: int) -> str:
        return self.storage.child("plans", source, f"{epoch:012d}.json")

    def prune_plans(self) -> int:
        """Delete the recorded plans of epochs no retained checkpoint replays (at or before the oldest
        retained checkpoint's epoch; an older savepoint's restore re-plans them); return how many."""
        checkpoints = [e for e in self.coordinator.store.all() if not e.is_savepoint]
        if not checkpoints:
            return 0
        oldest = min(e.epoch for e in checkpoints)
        pruned = 0
        for source in self.pipeline.sources:
            for name in self.storage.list_names(self.storage.child("plans", source.name)):
                stem = name.removesuffix(".json")
                if stem.isdigit() and int(stem) <= oldest:
                    self.storage.delete_tree(self.storage.child("plans", source.name, name))
                    pruned += 1
        return pruned

    def state_handles(self, stage: Stage, store: OperatorStateStore | None = None) -> list[StateHandle]:
        keyed = self.keyed[stage.name]
        handles = [keyed.snapshot(d, parallelism=self.parallelism) for d in stage.keyed_state]
        backend = self.operator[stage.name]
        handles += [backend.snapshot(d, self.parallelism) for d in stage.operator_state]
        return handles
