"""A tiny checkpointed stage for tests of snapshots, restore and retention.

One stage ``agg`` with one keyed value state (``total``: key -> long) and one
split-distribute operator state (``offsets``), checkpointed through the real
coordinator, :func:`~state.snapshots.materialize_handles` and
:func:`~state.retention.release`: the calls the epoch runner makes, in order.
The harness remembers what the state was at each checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from epochal.config.models import CheckpointMode
from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.checkpoint.hooks import MasterTriggerRestoreHook
from epochal.state.checkpoint.ids import InMemoryIdCounter
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.testing import SimulatedCrash
from epochal.state.checkpoint.store import InMemoryCompletedCheckpointStore
from epochal.state.descriptors import KeyedStateDescriptor, ListOperatorState, ValueStateDescriptor
from epochal.state.backends.keyed import KeyedStateBackend
from epochal.state.backends.operator import OperatorStateBackend
from epochal.state.recovery.restore import RestoreResult, StateTarget, restore_state
from epochal.state.checkpoint.retention import Deleter, RetentionReport, delete_url, release
from epochal.state.checkpoint.snapshots import materialize_handles, working_root

STAGE = "agg"
TASK = "stage:agg"
TOTAL = ValueStateDescriptor("total", value_type=T.LongType())
OFFSETS = ListOperatorState("offsets", T.LongType())


class CrashingDeleter:
    """A retention deleter that dies (:class:`SimulatedCrash`) after ``n`` deletions."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.deleted: list[str] = []

    def __call__(self, url: str) -> None:
        if self.left == 0:
            raise SimulatedCrash(f"crash before deleting {url}")
        self.left -= 1
        delete_url(url)
        self.deleted.append(url)


@dataclass(frozen=True)
class Content:
    """The state at one checkpoint: keyed totals and the operator list elements."""

    totals: dict[str, Any]
    offsets: tuple[int, ...]


@dataclass
class LifecycleHarness:
    spark: Any
    base: Path
    retain: int = 2
    mode: CheckpointMode = CheckpointMode.INCREMENTAL
    parallelism: int = 2
    max_parallelism: int = 16
    hooks: Sequence[MasterTriggerRestoreHook] = ()
    with_operator: bool = True
    total: KeyedStateDescriptor = TOTAL
    auto_release: bool = True
    expected: dict[int, Content] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.storage = CheckpointStorage(f"file://{Path(self.base).resolve()}/checkpoints")
        self.store = InMemoryCompletedCheckpointStore(self.retain)
        self.clock = ManualClock()
        self.coordinator = CheckpointCoordinator(
            storage=self.storage, store=self.store, clock=self.clock, id_counter=InMemoryIdCounter(),
            hooks=self.hooks, policy=CoordinatorPolicy(mode=self.mode),
        )
        self._totals: dict[str, Any] = {}
        self._offsets: tuple[int, ...] = ()
        self.reopen()

    # -- backends ------------------------------------------------------------------------

    def reopen(self, total: KeyedStateDescriptor | None = None) -> None:
        """Fresh backends (after a restore the old ones cache what they opened)."""
        self.total = total or self.total
        root = working_root(self.storage)
        self.keyed = KeyedStateBackend(self.spark, root, STAGE, max_parallelism=self.max_parallelism)
        self.operator = OperatorStateBackend(self.spark, root, STAGE)

    def targets(self) -> list[StateTarget]:
        targets = [StateTarget.keyed(self.keyed, self.total)]
        if self.with_operator:
            targets.append(StateTarget.operator(self.operator, OFFSETS))
        return targets

    # -- epochs --------------------------------------------------------------------------

    def run_epoch(
        self, epoch: int, totals: Mapping[str, int | None], offsets: Sequence[int] | None = None, *,
        savepoint: str | None = None,
    ) -> CompletedCheckpoint:
        """Write the epoch's state changes, then checkpoint (or take a savepoint of) it."""
        self.clock.advance(60)
        self.keyed.begin_epoch(epoch, self.clock.now())
        if totals:
            schema = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", self.total.stored_type)])
            rows = [(k, v) for k, v in totals.items()]
            self.keyed.update(self.total, self.spark.createDataFrame(rows, schema))
            self._totals = {k: v for k, v in {**self._totals, **totals}.items() if v is not None}
        if self.with_operator and offsets is not None:
            rows = [(i % self.parallelism, v) for i, v in enumerate(offsets)]
            self.operator.write(OFFSETS, self.spark.createDataFrame(rows, "subtask int, value long"), self.parallelism)
            self._offsets = tuple(offsets)
        return self.checkpoint(epoch, savepoint=savepoint)

    def checkpoint(self, epoch: int, *, savepoint: str | None = None) -> CompletedCheckpoint:
        positions = {"source": {"epoch": epoch}}
        if savepoint is None:
            result = self.coordinator.trigger(epoch, [TASK], positions, max_parallelism=self.max_parallelism)
        else:
            result = self.coordinator.trigger_savepoint(
                epoch, [TASK], positions, name=savepoint, max_parallelism=self.max_parallelism
            )
        assert result.pending is not None, result.failure
        pending = result.pending
        handles = [self.keyed.snapshot(self.total, parallelism=self.parallelism)]
        if self.with_operator:
            handles.append(self.operator.snapshot(OFFSETS, self.parallelism))
        handles = materialize_handles(self.spark, self.storage, handles, pending)
        completion = self.coordinator.acknowledge(pending.checkpoint_id, TASK, epoch, handles).completion
        assert completion is not None and completion.succeeded, completion
        self.expected[int(pending.checkpoint_id)] = Content(dict(self._totals), self._offsets)
        if self.auto_release:
            self.release()
        return completion.completed

    def release(self, deleter: Deleter = delete_url) -> RetentionReport:
        return release(self.coordinator, deleter=deleter)

    def restore(self, pointer: str | int | None = None, **kwargs: Any) -> RestoreResult:
        kwargs.setdefault("targets", self.targets())
        result = restore_state(self.spark, self.coordinator, pointer, **kwargs)
        self.reopen()
        return result

    # -- reading -------------------------------------------------------------------------

    def totals(self) -> dict[str, Any]:
        return {r.key: _plain(r.value) for r in self.keyed.values(self.total).collect()}

    def offsets(self, parallelism: int | None = None) -> list[tuple[int, int]]:
        """(subtask, value) as ``parallelism`` subtasks see the operator state."""
        rows = self.operator.read(OFFSETS, parallelism or self.parallelism).collect()
        return sorted((r.subtask, r.value) for r in rows)

    def content(self) -> Content:
        values = tuple(v for _, v in self.offsets()) if self.with_operator else ()
        return Content(self.totals(), tuple(sorted(values)))

    def expected_content(self, checkpoint_id: int) -> Content:
        expected = self.expected[checkpoint_id]
        return Content(expected.totals, tuple(sorted(expected.offsets)))


def _plain(value: Any) -> Any:
    """Rows (struct values) as tuples, so they compare with what was written."""
    return tuple(_plain(v) for v in value) if isinstance(value, tuple) else value
