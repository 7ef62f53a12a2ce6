"""Per-key state access: Flink's ``KeyedProcessFunction``, as a grouped pandas function.

The stage's batch is grouped by key and co-grouped with the current state of
the keys it touches (one row per key and namespace, one column per state).
For every key, the user's ``process(key, records, ctx)`` runs in a Python
worker with handles on that key's state (``ctx.value(desc).update(...)`` ...)
and returns output rows. State changes come back from the workers as rows and
are merged into the Delta tables: nothing is collected to the driver.

The state is read at a pinned Delta version, so a recomputed partition sees
exactly the state the first computation saw.

Event-time timers (Flink's ``TimerService``): given ``timers`` (an
:class:`~epochal.state.backends.timers.EventTimeTimers`, declared among the
stage's keyed state) and the ``watermark`` the epoch ends with,
``ctx.timer_service()`` registers and deletes timers of the current key, and
after ``process`` every timer at or before the watermark fires, in timestamp
order, as ``function.on_timer(timestamp, key, ctx)`` -- also for keys without
records this epoch. Timestamps are naive UTC datetimes, as Spark hands
timestamps to pandas (the session time zone is UTC).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.state.descriptors import (
    AggregatingStateDescriptor,
    KeyedStateDescriptor,
    KeyedStateType,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from epochal.state.errors import StateSchemaError
from epochal.state.backends.keyed import _DELETE, VOID_NAMESPACE, KeyedStateBackend
from epochal.state.delta import io as delta_io

if TYPE_CHECKING:
    import pandas as pd  # imported where a pandas function runs (the commands without a JVM skip its 0.3 s)

    from epochal.state.backends.timers import EventTimeTimers

_KIND = "__kind"
_IDX = "__state"
_NS = "__ns"
_KEY = "__key"


class KeyedProcessFunction(Protocol):
    """User code called once per key per epoch with that key's new records."""

    def process(self, key: Any, records: pd.DataFrame, ctx: "KeyedContext") -> Iterable[Mapping[str, Any]] | pd.DataFrame | None: ...

    # Optional, with timers: called for each timer at or before the watermark, after ``process``.
    # def on_timer(self, timestamp: datetime, key: Any, ctx: "KeyedContext") -> Iterable[Mapping[str, Any]] | None: ...


# -- state handles inside the Python worker ----------------------------------------------------


def _is_null(value: Any) -> bool:
    """None, NaN or NaT (a null timestamp reaches pandas as NaT, not None)."""
    import pandas as pd

    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _from_arrow(value: Any, dtype: T.DataType) -> Any:
    """pandas/Arrow value -> plain Python (lists, dicts)."""
    import pandas as pd

    if _is_null(value):
        return None
    if isinstance(dtype, T.ArrayType):
        return [_from_arrow(v, dtype.elementType) for v in list(value)]
    if isinstance(dtype, T.MapType):
        items = value.items() if isinstance(value, dict) else value
        return {k: _from_arrow(v, dtype.valueType) for k, v in items}
    if isinstance(dtype, T.StructType):
        return {f.name: _from_arrow(value.get(f.name), f.dataType) for f in dtype.fields} if isinstance(value, dict) else value
    if hasattr(value, "item") and not isinstance(value, (pd.Timestamp,)):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


class _Slot:
    """One (state, namespace) value of the current key, with a dirty flag."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.dirty = False

    def set(self, value: Any) -> None:
        self.value = value
        self.dirty = True


class ValueState:
    def __init__(self, slot: _Slot) -> None:
        self._slot = slot

    def value(self) -> Any:
        return self._slot.value

    def update(self, value: Any) -> None:
        self._slot.set(value)

    def clear(self) -> None:
        self._slot.set(None)


class ListState:
    def __init__(self, slot: _Slot) -> None:
        self._slot = slot

    def get(self) -> list:
        return list(self._slot.value or [])

    def add(self, value: Any) -> None:
        self._slot.set(self.get() + [value])

    def add_all(self, values: Iterable[Any]) -> None:
        self._slot.set(self.get() + list(values))

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        self._slot.set(values or None)

    def clear(self) -> None:
        self._slot.set(None)


class MapState:
    def __init__(self, slot: _Slot) -> None:
        self._slot = slot

    def _map(self) -> dict:
        return dict(self._slot.value or {})

    def get(self, key: Any, default: Any = None) -> Any:
        return self._map().get(key, default)

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def put(self, key: Any, value: Any) -> None:
        m = self._map()
        m[key] = value
        self._slot.set(m)

    def put_all(self, entries: Mapping[Any, Any]) -> None:
        m = self._map()
        m.update(entries)
        self._slot.set(m)

    def remove(self, key: Any) -> None:
        m = self._map()
        m.pop(key, None)
        self._slot.set(m or None)

    def items(self):
        return self._map().items()

    def keys(self):
        return self._map().keys()

    def values(self):
        return self._map().values()

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self._slot.set(None)


class ReducingState:
    def __init__(self, slot: _Slot, reduce: Callable[[Any, Any], Any]) -> None:
        self._slot = slot
        self._reduce = reduce

    def get(self) -> Any:
        return self._slot.value

    def add(self, value: Any) -> None:
        current = self._slot.value
        self._slot.set(value if current is None else self._reduce(current, value))

    def clear(self) -> None:
        self._slot.set(None)


class AggregatingState:
    def __init__(self, slot: _Slot, descriptor: AggregatingStateDescriptor) -> None:
        self._slot = slot
        self._d = descriptor

    def get(self) -> Any:
        return None if self._slot.value is None else self._d.py_result(self._slot.value)

    def add(self, value: Any) -> None:
        acc = self._slot.value if self._slot.value is not None else self._d.py_create()
        self._slot.set(self._d.py_add(acc, value))

    def clear(self) -> None:
        self._slot.set(None)


_EPOCH = datetime(1970, 1, 1)


def _naive_utc(moment: Any) -> datetime:
    """A datetime or pandas Timestamp as a naive UTC datetime (aware ones are converted)."""
    import pandas as pd

    if isinstance(moment, pd.Timestamp):
        moment = moment.to_pydatetime()
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def _micros(moment: datetime) -> int:
    return (_naive_utc(moment) - _EPOCH) // timedelta(microseconds=1)


class TimerService:
    """Flink's ``TimerService`` for the current key: event-time timers, kept in the timers state.

    A timer is one namespace (its timestamp in epoch microseconds) of the timers state,
    so a key holds at most one timer per timestamp, as in Flink.
    """

    def __init__(self, ctx: "KeyedContext") -> None:
        self._ctx = ctx

    def _slot(self, micros: int) -> _Slot:
        return self._ctx._slots.setdefault((self._ctx._timers, str(micros)), _Slot(None))

    def current_watermark(self) -> datetime | None:
        """The watermark this epoch ends with: timers at or before it fire after ``process``."""
        return self._ctx.watermark

    def register_event_time_timer(self, timestamp: datetime) -> None:
        micros = _micros(timestamp)
        self._slot(micros).set(_EPOCH + timedelta(microseconds=micros))

    def delete_event_time_timer(self, timestamp: datetime) -> None:
        self._slot(_micros(timestamp)).set(None)

    def event_time_timers(self) -> list[datetime]:
        """The key's registered timers, earliest first."""
        live = [int(ns) for (name, ns), slot in self._ctx._slots.items() if name == self._ctx._timers and slot.value is not None]
        return [_EPOCH + timedelta(microseconds=m) for m in sorted(live)]


@dataclass
class KeyedContext:
    """What ``process`` sees besides its records: the key's state, the epoch and its clock."""

    key: Any
    epoch: int
    now: Any
    _descriptors: dict[str, KeyedStateDescriptor]
    _slots: dict[tuple[str, str], _Slot]
    watermark: datetime | None = None
    _timers: str | None = None

    def _slot(self, descriptor: KeyedStateDescriptor, namespace: str, kind: KeyedStateType) -> _Slot:
        if descriptor.name not in self._descriptors:
            raise StateSchemaError(
                f"state {descriptor.name!r} was not declared for this stage; declared: {sorted(self._descriptors)}",
                action="add its descriptor to the stage's state list",
            )
        if descriptor.state_type is not kind:  # found from outside (probe 16): failed later, deep in pyarrow
            raise StateSchemaError(
                f"state {descriptor.name!r} is {descriptor.state_type.value} state, ctx.{kind.value}() needs "
                f"{kind.value} state",
                action=f"call ctx.{descriptor.state_type.value}() for it, or declare it with the descriptor of that kind",
            )
        return self._slots.setdefault((descriptor.name, namespace), _Slot(None))

    def value(self, d: ValueStateDescriptor, namespace: str = VOID_NAMESPACE) -> ValueState:
        return ValueState(self._slot(d, namespace, KeyedStateType.VALUE))

    def list(self, d: ListStateDescriptor, namespace: str = VOID_NAMESPACE) -> ListState:
        return ListState(self._slot(d, namespace, KeyedStateType.LIST))

    def map(self, d: MapStateDescriptor, namespace: str = VOID_NAMESPACE) -> MapState:
        return MapState(self._slot(d, namespace, KeyedStateType.MAP))

    def reducing(self, d: ReducingStateDescriptor, namespace: str = VOID_NAMESPACE) -> ReducingState:
        slot = self._slot(d, namespace, KeyedStateType.REDUCING)
        if d.py_reduce is None:
            raise StateSchemaError(f"reducing state {d.name!r} has no py_reduce= for per-key use")
        return ReducingState(slot, d.py_reduce)

    def aggregating(self, d: AggregatingStateDescriptor, namespace: str = VOID_NAMESPACE) -> AggregatingState:
        slot = self._slot(d, namespace, KeyedStateType.AGGREGATING)
        if d.py_add is None:
            raise StateSchemaError(f"aggregating state {d.name!r} has no py_create/py_add/py_result for per-key use")
        return AggregatingState(slot, d)

    def timer_service(self) -> TimerService:
        """The key's event-time timers (``run_keyed_process(..., timers=, watermark=)``)."""
        if self._timers is None:
            raise StateSchemaError("this per-key function runs without timers: pass timers= and watermark= to run_keyed_process")
        return TimerService(self)

    def namespaces(self, d: KeyedStateDescriptor) -> list[str]:
        """Namespaces holding a value of ``d`` for this key."""
        return sorted(ns for (name, ns), slot in self._slots.items() if name == d.name and slot.value is not None)


# -- the grouped function ---------------------------------------------------------------------


def _result_schema(descriptors: Sequence[KeyedStateDescriptor], key_type: T.DataType, output: T.StructType) -> T.StructType:
    fields = [
        T.StructField(_KIND, T.StringType(), False),
        T.StructField(_KEY, key_type, True),
        T.StructField(_IDX, T.IntegerType(), True),
        T.StructField(_NS, T.StringType(), True),
        T.StructField(_DELETE, T.BooleanType(), True),
    ]
    fields += [T.StructField(f"__s{i}", d.stored_type, True) for i, d in enumerate(descriptors)]
    fields += [T.StructField(f.name, f.dataType, True) for f in output.fields]
    return T.StructType(fields)


def _make_grouped(
    function: KeyedProcessFunction,
    descriptors: Sequence[KeyedStateDescriptor],
    output: T.StructType,
    epoch: int,
    now: Any,
    key_col: str,
    timers: str | None = None,
    watermark: datetime | None = None,
):
    names = [d.name for d in descriptors]
    by_name = {d.name: d for d in descriptors}
    out_cols = [f.name for f in output.fields]
    columns = [_KIND, _KEY, _IDX, _NS, _DELETE] + [f"__s{i}" for i in range(len(descriptors))] + out_cols

    def grouped(key_tuple, records: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        if records.empty and timers is None:
            return pd.DataFrame({c: [] for c in columns})
        key = _from_arrow(key_tuple[0], T.StringType()) if key_tuple else None
        slots: dict[tuple[str, str], _Slot] = {}
        for _, row in state.iterrows():
            for i, name in enumerate(names):
                value = row.get(f"__s{i}")
                if not _is_null(value):
                    slots[(name, row["namespace"])] = _Slot(_from_arrow(value, descriptors[i].stored_type))
        ctx = KeyedContext(key, epoch, now, by_name, slots, watermark, timers)
        produced = [] if records.empty else list(_iter_outputs(function.process(key, records.drop(columns=[_KEY]), ctx)))
        if timers is not None:
            produced += _fire_timers(function, key, ctx)
        rows: list[dict] = []
        for record in produced:
            unknown = set(record) - set(out_cols)
            if unknown:
                raise StateSchemaError(f"process() returned columns {sorted(unknown)} not in the output schema {out_cols}")
            rows.append({_KIND: "out", _KEY: key, **record})
        for (name, namespace), slot in slots.items():
            if slot.dirty:
                i = names.index(name)
                empty = slot.value is None or (isinstance(slot.value, (list, dict)) and not slot.value)
                rows.append({_KIND: "state", _KEY: key, _IDX: i, _NS: namespace, _DELETE: empty, f"__s{i}": None if empty else slot.value})
        blank = dict.fromkeys(columns)
        return pd.DataFrame([{**blank, **row} for row in rows], columns=columns, dtype=object)

    return grouped


def _fire_timers(function: KeyedProcessFunction, key: Any, ctx: KeyedContext) -> list[Mapping[str, Any]]:
    """Fire the key's timers at or before the watermark, earliest first (Flink's ``onTimer``)."""
    out: list[Mapping[str, Any]] = []
    service = ctx.timer_service()
    while ctx.watermark is not None:
        due = [t for t in service.event_time_timers() if t <= ctx.watermark]
        if not due:
            break
        service.delete_event_time_timer(due[0])
        if not hasattr(function, "on_timer"):
            raise StateSchemaError(f"a timer of key {key!r} fired but {type(function).__name__} has no on_timer()")
        out += list(_iter_outputs(function.on_timer(due[0], key, ctx)))
    return out


def _iter_outputs(produced: Any) -> Iterable[Mapping[str, Any]]:
    import pandas as pd

    if produced is None:
        return []
    if isinstance(produced, pd.DataFrame):
        return produced.to_dict("records")
    return produced


def _wide_state(backend: KeyedStateBackend, descriptors: Sequence[KeyedStateDescriptor], key_type: T.DataType) -> DataFrame:
    """One row per (key, namespace) with a column ``__s<i>`` per state, at pinned versions."""
    parts = []
    for i, d in enumerate(descriptors):
        path = backend.open(d)
        live = backend._live(delta_io.read_pinned(backend.spark, path))
        cols = [F.col("key").cast(key_type).alias("key"), F.col("namespace")]
        cols += [
            (F.col("value") if j == i else F.lit(None).cast(dj.stored_type)).alias(f"__s{j}")
            for j, dj in enumerate(descriptors)
        ]
        parts.append(live.select(*cols))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    # Each column holds one non-null value per key and namespace: max_by takes it whatever the rows' order
    # (first(ignorenulls) would too, but reads as order-dependent to epochal.state.determinism).
    aggs = [F.max_by(f"__s{j}", F.col(f"__s{j}").isNotNull()).alias(f"__s{j}") for j in range(len(descriptors))]
    return union.groupBy("key", "namespace").agg(*aggs)


def run_keyed_process(
    backend: KeyedStateBackend,
    batch: DataFrame,
    key_col: str,
    descriptors: Sequence[KeyedStateDescriptor],
    function: KeyedProcessFunction,
    output_schema: T.StructType,
    *,
    timers: "EventTimeTimers | None" = None,
    watermark: datetime | None = None,
) -> DataFrame:
    """Run ``function`` per key over ``batch``, write the changed state, return the outputs.

    With ``timers`` (declared among the stage's keyed state too, so that it is
    checkpointed) and ``watermark`` (the event time this epoch ends with; None: no
    timer fires), ``ctx.timer_service()`` works in ``process`` and every timer at
    or before ``watermark`` fires as ``function.on_timer(timestamp, key, ctx)``,
    for the batch's keys and for keys whose only reason to run is a due timer.

    The returned DataFrame is persisted; call ``.unpersist()`` when done with it.
    """
    if not descriptors:
        raise StateSchemaError("run_keyed_process needs at least one state descriptor")
    if timers is not None:
        descriptors = [d for d in descriptors if d.name != timers.descriptor.name] + [timers.descriptor]
    key_type = descriptors[0].key_type
    keyed = batch.withColumn(_KEY, F.col(key_col).cast(key_type))
    state = _wide_state(backend, descriptors, key_type)
    touched = keyed.select(F.col(_KEY).alias("key")).distinct()
    wm = None if watermark is None else _naive_utc(watermark)
    if timers is not None and wm is not None:  # keys with a due timer run too (pinned read, like the state)
        aware = wm.replace(tzinfo=timezone.utc)
        touched = touched.union(timers.due(backend, aware).select(F.col("key").cast(key_type))).distinct()
    state = state.join(touched, "key", "left_semi")
    ctx = backend.context
    grouped = _make_grouped(
        function, descriptors, output_schema, ctx.epoch, ctx.now, key_col,
        timers.descriptor.name if timers is not None else None, wm,
    )
    result = (
        keyed.groupBy(_KEY)
        .cogroup(state.groupBy("key"))
        .applyInPandas(grouped, _result_schema(descriptors, key_type, output_schema))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    for i, d in enumerate(descriptors):
        changes = result.where((F.col(_KIND) == "state") & (F.col(_IDX) == i)).select(
            F.col(_KEY).alias("key"), F.col(_NS).alias("namespace"), F.col(f"__s{i}").alias("value"), F.col(_DELETE)
        )
        backend.write_full_values(d, changes)
    return result.where(F.col(_KIND) == "out").select(*[F.col(f.name) for f in output_schema.fields])
