"""Operator (non-keyed) state in Delta, as Flink's ``OperatorStateBackend``.

A subtask is a Spark partition index of the stage. List state keeps a list of
elements per subtask; on restore with another parallelism it is redistributed
as Flink does:

- ``SPLIT_DISTRIBUTE``: all elements, in (subtask, position) order, are cut
  into contiguous runs spread evenly over the new subtasks;
- ``UNION``: every new subtask gets every element;
- ``BROADCAST``: one map, the same copy on every subtask.

Each state is one Delta table ``<root>/<stage>/<state>``; a write replaces the
whole (small) state in one commit. Redistribution happens in Spark.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.state.backends.values import check_value_type
from epochal.state.delta import io as delta_io
from epochal.state.delta import overwrite as delta_overwrite
from epochal.state.determinism import SUBTASK_COLUMN, PlanInspector
from epochal.state.descriptors import OperatorStateDescriptor, OperatorStateMode
from epochal.state.errors import StateSchemaError
from epochal.state.fence import Fence, no_fence
from epochal.state.frames import empty_frame
from epochal.state.handles import StateHandle, StateKind
from epochal.state.delta.tables import create_table, restore_table, snapshot_table

if TYPE_CHECKING:  # pandas is imported where a pandas function runs (the commands without a JVM skip its 0.3 s)
    import pandas as pd

PROP_MODE = "epochal.operatorStateMode"
PROP_VALUE_TYPE = "epochal.valueType"


def operator_table_schema(descriptor: OperatorStateDescriptor) -> T.StructType:
    return T.StructType(
        [
            T.StructField("subtask", T.IntegerType(), False),
            T.StructField("ord", T.LongType(), False),
            T.StructField("parallelism", T.IntegerType(), False),
            T.StructField("map_key", descriptor.map_key_type, True),
            T.StructField("value", descriptor.value_type, True),
        ]
    )


def split_assignment(index: int, total: int, parallelism: int) -> int:
    """New subtask of the ``index``-th of ``total`` split-distributed elements (pure form)."""
    return index * parallelism // total


class OperatorStateBackend:
    """Operator state of one stage, in Delta tables under ``root/<stage>/``."""

    def __init__(self, spark, root: str, stage: str) -> None:
        self.spark = spark
        self.root = root.rstrip("/")
        self.stage = stage
        self._opened: dict[str, str] = {}
        #: Called before every write of a table (see :mod:`epochal.state.fence`).
        self.fence: Fence = no_fence
        #: Reads the plans of the frames written (``epochal verify``; see :mod:`epochal.state.determinism`).
        self.inspector: PlanInspector | None = None

    def table_path(self, descriptor: OperatorStateDescriptor) -> str:
        return posixpath.join(self.root, self.stage, descriptor.name)

    def open(self, descriptor: OperatorStateDescriptor) -> str:
        path = self.table_path(descriptor)
        recorded = self._opened.get(path)
        if recorded is not None:
            self._check_mode(descriptor, recorded)
            return path
        if not delta_io.is_delta_table(path):
            props = {
                **delta_io.state_table_properties(self.spark),
                PROP_MODE: descriptor.mode.value,
                PROP_VALUE_TYPE: descriptor.value_type.json(),
            }
            create_table(self.spark, path, operator_table_schema(descriptor), props)
        else:
            self.check(descriptor)
        self._opened[path] = descriptor.mode.value
        return path

    def check(self, descriptor: OperatorStateDescriptor) -> None:
        """Refuse the state's table if another redistribution mode or value type wrote it (from the Delta log,
        no Spark job; nothing when there is no table yet)."""
        path = self.table_path(descriptor)
        if not delta_io.is_delta_table(path):
            return
        props = delta_io.table_properties(path)
        if (recorded := props.get(PROP_MODE)) is not None:
            self._check_mode(descriptor, recorded)
        check_value_type(f"operator state {self.stage}/{descriptor.name}", descriptor.name, descriptor.value_type,
                         props.get(PROP_VALUE_TYPE))

    def _check_mode(self, descriptor: OperatorStateDescriptor, recorded: str) -> None:
        if recorded != descriptor.mode.value:
            raise StateSchemaError(
                f"operator state {self.stage}/{descriptor.name} was written as {recorded} state, "
                f"not {descriptor.mode.value}",
                action="keep a state's redistribution mode, or give the new state another name",
                state=descriptor.name,
            )

    # -- writing ---------------------------------------------------------------------------

    def write(self, descriptor: OperatorStateDescriptor, elements: DataFrame, parallelism: int) -> None:
        """Replace the state. List modes: columns subtask, value[, ord]. Broadcast: map_key, value."""
        if self.inspector is not None:
            self.inspector.see(self.stage, f"operator state {descriptor.name}", elements)
        path = self.open(descriptor)
        if descriptor.mode is OperatorStateMode.BROADCAST:
            self._require(descriptor, elements, ("map_key", "value"))
            rows = elements.select(
                F.lit(0).alias("subtask"),
                F.row_number().over(Window.orderBy("map_key")).cast("long").alias("ord"),
                F.col("map_key").cast(descriptor.map_key_type).alias("map_key"),
                F.col("value").cast(descriptor.value_type).alias("value"),
            )
        else:
            self._require(descriptor, elements, ("subtask", "value"))
            order = F.col("ord") if "ord" in elements.columns else F.monotonically_increasing_id()
            # Checked as the rows are written (Spark's raise_error), not by a job of its own; translated below.
            outside = (F.col("subtask") < 0) | (F.col("subtask") >= parallelism)
            rows = elements.select(
                F.when(outside, F.raise_error(F.lit(self._outside_message(descriptor, parallelism))))
                .otherwise(F.col("subtask")).cast("int").alias("subtask"),
                F.row_number().over(Window.partitionBy("subtask").orderBy(order)).cast("long").alias("ord"),
                F.lit(None).cast(descriptor.map_key_type).alias("map_key"),
                F.col("value").cast(descriptor.value_type).alias("value"),
            )
        rows = rows.withColumn("parallelism", F.lit(parallelism).cast("int"))
        self.fence(f"write state {self.stage}/{descriptor.name}")
        try:
            columns = [f.name for f in operator_table_schema(descriptor).fields]
            delta_overwrite.overwrite(self.spark, path, lambda version: rows.select(*columns))
        except Exception as exc:  # noqa: BLE001 - the subtask check fails inside a Spark job
            message = self._outside_message(descriptor, parallelism)
            if message in str(exc):
                raise StateSchemaError(message, state=descriptor.name) from exc
            raise

    def _outside_message(self, descriptor: OperatorStateDescriptor, parallelism: int) -> str:
        return f"operator state {self.stage}/{descriptor.name}: subtask outside [0, {parallelism})"

    def _require(self, descriptor: OperatorStateDescriptor, df: DataFrame, needed: Iterable[str]) -> None:
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise StateSchemaError(
                f"writing operator state {self.stage}/{descriptor.name} ({descriptor.mode.value}): "
                f"missing column(s) {missing}; got {df.columns}",
                state=descriptor.name,
            )

    # -- reading ---------------------------------------------------------------------------

    def read_raw(self, descriptor: OperatorStateDescriptor, version: int | None = None) -> DataFrame:
        """The stored rows, pinned at the call (the Delta version of this moment, or ``version``)."""
        path = self.open(descriptor)
        return delta_io.read_pinned(self.spark, path, version)

    def read(self, descriptor: OperatorStateDescriptor, parallelism: int) -> DataFrame:
        """The state as seen by ``parallelism`` subtasks: subtask, [map_key,] value (redistributed)."""
        return redistribute(self.spark, self.read_raw(descriptor), descriptor.mode, parallelism)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, descriptor: OperatorStateDescriptor, parallelism: int | None = None) -> StateHandle:
        path = self.open(descriptor)
        kind = StateKind.BROADCAST if descriptor.mode is OperatorStateMode.BROADCAST else StateKind.OPERATOR
        return snapshot_table(
            self.spark, path, stage=self.stage, state=descriptor.name, kind=kind,
            state_type=descriptor.mode.value, max_parallelism=None, parallelism=parallelism,
        )

    def restore(self, descriptor: OperatorStateDescriptor, handle: StateHandle) -> None:
        self.fence(f"restore state {self.stage}/{descriptor.name}")
        restore_table(self.spark, self.table_path(descriptor), handle)
        self._opened.pop(self.table_path(descriptor), None)


def redistribute(spark, stored: DataFrame, mode: OperatorStateMode, parallelism: int) -> DataFrame:
    """Flink's operator-state repartitioning, in Spark: once, when the state was written at another parallelism.

    Rows written at ``parallelism`` stay with their subtask (a subtask sees its own list, epoch after
    epoch, so a union list written back does not grow). Rows written at another parallelism are
    redistributed by mode: split lists cut into contiguous runs, union lists given whole to every
    subtask; the next write stores them at ``parallelism``. Broadcast state is one map on every subtask.
    """
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    subtasks = spark.range(parallelism).select(F.col("id").cast("int").alias("subtask"))
    if mode is OperatorStateMode.BROADCAST:
        entries = stored.select("map_key", "value")
        return subtasks.crossJoin(entries).select("subtask", "map_key", "value")
    same = F.col("parallelism") == F.lit(parallelism)
    kept = stored.where(same).select("subtask", F.col("subtask").alias("old_subtask"), "ord", "value")
    moved = stored.where(~same)
    if mode is OperatorStateMode.UNION:
        elements = moved.select(F.col("subtask").alias("old_subtask"), "ord", "value")
        return kept.unionByName(subtasks.crossJoin(elements).select("subtask", "old_subtask", "ord", "value"))
    everything = Window.orderBy("subtask", "ord")
    total = Window.partitionBy()
    indexed = moved.select(
        F.col("subtask").alias("old_subtask"),
        "ord",
        "value",
        (F.row_number().over(everything) - 1).alias("__i"),
        F.count(F.lit(1)).over(total).alias("__n"),
    )
    new = F.floor(F.col("__i") * F.lit(parallelism) / F.col("__n")).cast("int")
    return kept.unionByName(indexed.select(new.alias("subtask"), "old_subtask", "ord", "value"))


# -- CheckpointedFunction ---------------------------------------------------------------------


@dataclass
class OperatorListState:
    """A list state as seen by the current parallelism; changes are kept until snapshot."""

    descriptor: OperatorStateDescriptor
    store: "OperatorStateStore"

    def get(self) -> DataFrame:
        pending = self.store._pending.get(self.descriptor.name)
        if pending is not None:
            return pending
        return self.store.backend.read(self.descriptor, self.store.parallelism)

    def update(self, elements: DataFrame) -> None:
        """Replace the list: columns subtask, value (broadcast: map_key, value)."""
        self.store._pending[self.descriptor.name] = elements

    def __reduce__(self):
        # A function holding this handle may be shipped to Python workers: the handle
        # travels as a placeholder that explains itself if used there.
        return (_DriverOnlyHandle, (self.descriptor.name,))


class _DriverOnlyHandle:
    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str):
        raise StateSchemaError(
            f"operator state handle {self.name!r} lives on the driver; inside process() use the "
            "SubtaskState argument (state.list(descriptor))"
        )


@dataclass
class OperatorStateStore:
    """Flink's ``OperatorStateStore`` for one stage at one parallelism."""

    backend: OperatorStateBackend
    parallelism: int
    _pending: dict[str, DataFrame] = field(default_factory=dict)
    _registered: dict[str, OperatorStateDescriptor] = field(default_factory=dict)

    def _register(self, descriptor: OperatorStateDescriptor, mode: OperatorStateMode) -> OperatorListState:
        if descriptor.mode is not mode:
            raise StateSchemaError(
                f"operator state {descriptor.name!r} is declared {descriptor.mode.value}, asked for as {mode.value}"
            )
        self._registered[descriptor.name] = descriptor
        self.backend.open(descriptor)
        return OperatorListState(descriptor, self)

    def get_list_state(self, descriptor: OperatorStateDescriptor) -> OperatorListState:
        return self._register(descriptor, OperatorStateMode.SPLIT_DISTRIBUTE)

    def get_union_list_state(self, descriptor: OperatorStateDescriptor) -> OperatorListState:
        return self._register(descriptor, OperatorStateMode.UNION)

    def get_broadcast_state(self, descriptor: OperatorStateDescriptor) -> OperatorListState:
        return self._register(descriptor, OperatorStateMode.BROADCAST)

    def flush(self) -> None:
        """Write pending changes: one commit per changed state."""
        for name, elements in self._pending.items():
            self.backend.write(self._registered[name], elements, self.parallelism)
        self._pending.clear()

    def snapshot(self) -> list[StateHandle]:
        """Write pending changes; handles on every registered state."""
        self.flush()
        return [self.backend.snapshot(d, self.parallelism) for d in self._registered.values()]


@dataclass(frozen=True)
class FunctionInitializationContext:
    is_restored: bool
    operator_state_store: OperatorStateStore
    keyed_state_store: Any = None


@dataclass(frozen=True)
class FunctionSnapshotContext:
    checkpoint_id: int | None
    epoch: int


class CheckpointedFunction(Protocol):
    """Flink's ``CheckpointedFunction``: initialize on start/restore, snapshot at the epoch boundary."""

    def initialize_state(self, context: FunctionInitializationContext) -> None: ...

    def snapshot_state(self, context: FunctionSnapshotContext) -> None: ...


def initialize_function(function: CheckpointedFunction, store: OperatorStateStore, *, is_restored: bool, keyed: Any = None) -> None:
    function.initialize_state(FunctionInitializationContext(is_restored, store, keyed))


def snapshot_function(function: CheckpointedFunction, store: OperatorStateStore, *, checkpoint_id: int | None, epoch: int) -> list[StateHandle]:
    function.snapshot_state(FunctionSnapshotContext(checkpoint_id, epoch))
    return store.snapshot()


# -- per-subtask Python functions --------------------------------------------------------------


class SubtaskFunction(Protocol):
    """Called once per subtask with its records and its list state; returns output rows."""

    def process(self, subtask: int, records: pd.DataFrame, state: "SubtaskState") -> Iterable[Mapping[str, Any]] | None: ...


@dataclass
class SubtaskState:
    lists: dict[str, list]
    broadcast: dict[str, dict]

    def list(self, descriptor: OperatorStateDescriptor) -> list:
        return self.lists.setdefault(descriptor.name, [])

    def broadcast_map(self, descriptor: OperatorStateDescriptor) -> dict:
        return self.broadcast.get(descriptor.name, {})


def _subtask_state_rows(
    store: OperatorStateStore, lists: Sequence[OperatorStateDescriptor], broadcasts: Sequence[OperatorStateDescriptor]
) -> DataFrame:
    """Every subtask's list elements and broadcast entries as ``__subtask, __idx, __v`` (JSON) rows."""
    p = store.parallelism
    state = empty_frame(store.backend.spark, "__subtask int, __idx int, __v string")
    for i, d in enumerate(lists):
        listed = store.get_list_state(d) if d.mode is OperatorStateMode.SPLIT_DISTRIBUTE else store.get_union_list_state(d)
        part = listed.get().select(F.col("subtask").alias("__subtask"), F.lit(i).alias("__idx"), F.to_json(F.struct("value")).alias("__v"))
        state = state.unionByName(part)
    for j, d in enumerate(broadcasts):
        store.get_broadcast_state(d)
        part = store.backend.read(d, p).select(
            F.col("subtask").alias("__subtask"), F.lit(-1 - j).alias("__idx"), F.to_json(F.struct("map_key", "value")).alias("__v")
        )
        state = state.unionByName(part)
    return state


def _subtask_grouped(function: SubtaskFunction, names: list[str], bnames: list[str], schema: T.StructType):
    """The cogrouped pandas function: rebuild the subtask's state, call ``process``, emit outputs and new lists."""

    def grouped(key, recs: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
        import json

        import pandas as pd

        subtask = int(key[0])
        lists_now: dict[str, list] = {n: [] for n in names}
        bcast: dict[str, dict] = {n: {} for n in bnames}
        for _, row in st.iterrows():
            payload, idx = json.loads(row["__v"]), int(row["__idx"])
            if idx >= 0:
                lists_now[names[idx]].append(payload.get("value"))
            else:
                bcast[bnames[-1 - idx]][payload.get("map_key")] = payload.get("value")
        state_obj = SubtaskState(lists_now, bcast)
        produced = function.process(subtask, recs.drop(columns=["__subtask"]), state_obj) if not recs.empty else None
        blank = dict.fromkeys(schema.names)
        rows = [{**blank, "__kind": "out", **r} for r in (produced or [])]
        for i, n in enumerate(names):
            for v in state_obj.lists.get(n, []):
                rows.append({**blank, "__kind": "state", "__subtask": subtask, "__idx": i, "__v": json.dumps({"value": v}, default=str)})
        return pd.DataFrame(rows, columns=schema.names, dtype=object)

    return grouped


def run_subtask_process(
    store: OperatorStateStore,
    batch: DataFrame,
    lists: Sequence[OperatorStateDescriptor],
    function: SubtaskFunction,
    output_schema: T.StructType,
    broadcasts: Sequence[OperatorStateDescriptor] = (),
) -> DataFrame:
    """Run ``function`` per subtask (Spark partition) with its list state; stage the new lists.

    The new lists are staged in ``store`` and written by ``store.snapshot()``.
    Broadcast state is read-only here (every subtask sees the same map).
    """
    records = batch.repartition(store.parallelism).withColumn(SUBTASK_COLUMN, F.spark_partition_id())
    state = _subtask_state_rows(store, lists, broadcasts)
    schema = T.StructType(
        [T.StructField("__kind", T.StringType()), T.StructField("__subtask", T.IntegerType()), T.StructField("__idx", T.IntegerType()), T.StructField("__v", T.StringType())]
        + [T.StructField(f.name, f.dataType, True) for f in output_schema.fields]
    )
    grouped = _subtask_grouped(function, [d.name for d in lists], [d.name for d in broadcasts], schema)
    result = (
        records.groupBy("__subtask").cogroup(state.groupBy("__subtask")).applyInPandas(grouped, schema)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    for i, d in enumerate(lists):
        value = F.from_json("__v", T.StructType([T.StructField("value", d.value_type)]))["value"]
        store._pending[d.name] = result.where((F.col("__kind") == "state") & (F.col("__idx") == i)).select(
            F.col("__subtask").alias("subtask"), value.alias("value")
        )
    return result.where(F.col("__kind") == "out").select(*[f.name for f in output_schema.fields])
