"""Typed state descriptors, as Flink's ``StateDescriptor`` family.

A descriptor names a state and gives the Spark type of its values. Keyed
descriptors (value, list, map, reducing, aggregating) may carry a TTL; operator
descriptors (split-distribute list, union list, broadcast map) say how their
elements are redistributed when the parallelism changes.

Reducing and aggregating descriptors carry two forms of their functions: Spark
``Column`` functions for set-oriented stages (they run in the JVM, in
``aggregate`` higher-order functions) and plain Python functions for per-key
stages (they run inside the grouped pandas function).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any, Callable

from pyspark.sql import Column
from pyspark.sql import types as T

from epochal.state.errors import StateDescriptorError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class KeyedStateType(str, Enum):
    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


class OperatorStateMode(str, Enum):
    """Flink's ``OperatorStateHandle.Mode``."""

    SPLIT_DISTRIBUTE = "split"
    UNION = "union"
    BROADCAST = "broadcast"


class TtlUpdateType(str, Enum):
    """When a keyed value's TTL clock restarts (Flink's ``StateTtlConfig.UpdateType``)."""

    ON_CREATE_AND_WRITE = "on_create_and_write"


@dataclass(frozen=True)
class StateTtlConfig:
    """Time to live of keyed state, measured on the epoch clock (deterministic on replay).

    Expired entries are invisible to reads at once and removed from the table by
    the next write to that state (Flink's cleanup on write / full snapshot). It is kept
    per key and namespace: a list or map state expires as a whole and every write renews
    all of it (Flink keeps it per list element and per map entry).
    """

    ttl: timedelta
    update_type: TtlUpdateType = TtlUpdateType.ON_CREATE_AND_WRITE

    def __post_init__(self) -> None:
        if self.ttl <= timedelta(0):
            raise StateDescriptorError(f"state TTL must be positive, got {self.ttl}")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise StateDescriptorError(
            f"invalid state name {name!r}: use a letter then letters, digits or '_' (at most 64)",
            action="rename the state in its descriptor",
        )


def _check_callables(name: str, **functions: object) -> None:
    for what, function in functions.items():
        if function is not None and not callable(function):
            raise StateDescriptorError(f"state {name!r}: {what} must be a function, got {type(function).__name__} {function!r}")


def _check_type(name: str, what: str, dtype: object) -> None:
    if not isinstance(dtype, T.DataType):
        raise StateDescriptorError(
            f"state {name!r}: {what} must be a pyspark DataType, got {type(dtype).__name__}"
        )


@dataclass(frozen=True)
class KeyedStateDescriptor:
    """Base of keyed state descriptors. ``key_type`` is the type of the key column."""

    name: str
    ttl: StateTtlConfig | None = field(default=None, kw_only=True)
    key_type: T.DataType = field(default_factory=T.StringType, kw_only=True)

    state_type: KeyedStateType = field(init=False, default=KeyedStateType.VALUE)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_type(self.name, "key_type", self.key_type)
        if self.ttl is not None and not isinstance(self.ttl, StateTtlConfig):  # found from outside (probe 16)
            raise StateDescriptorError(
                f"state {self.name!r}: ttl must be a StateTtlConfig, got {type(self.ttl).__name__} {self.ttl!r}",
                action="give ttl=StateTtlConfig(timedelta(days=7)), say (epochal.StateTtlConfig)",
            )

    @property
    def stored_type(self) -> T.DataType:
        """Spark type of the ``value`` column in the state table."""
        raise NotImplementedError


@dataclass(frozen=True)
class ValueStateDescriptor(KeyedStateDescriptor):
    value_type: T.DataType = field(default_factory=T.StringType)
    state_type: KeyedStateType = field(init=False, default=KeyedStateType.VALUE)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.name, "value_type", self.value_type)

    @property
    def stored_type(self) -> T.DataType:
        return self.value_type


@dataclass(frozen=True)
class ListStateDescriptor(KeyedStateDescriptor):
    element_type: T.DataType = field(default_factory=T.StringType)
    state_type: KeyedStateType = field(init=False, default=KeyedStateType.LIST)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.name, "element_type", self.element_type)

    @property
    def stored_type(self) -> T.DataType:
        return T.ArrayType(self.element_type, containsNull=True)


@dataclass(frozen=True)
class MapStateDescriptor(KeyedStateDescriptor):
    user_key_type: T.DataType = field(default_factory=T.StringType)
    value_type: T.DataType = field(default_factory=T.StringType)
    state_type: KeyedStateType = field(init=False, default=KeyedStateType.MAP)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.name, "user_key_type", self.user_key_type)
        _check_type(self.name, "value_type", self.value_type)

    @property
    def stored_type(self) -> T.DataType:
        return T.MapType(self.user_key_type, self.value_type, valueContainsNull=True)


ColumnReduce = Callable[[Column, Column], Column]


@dataclass(frozen=True)
class ReducingStateDescriptor(KeyedStateDescriptor):
    """Keeps ``reduce(reduce(v1, v2), v3)...`` of every value added for a key."""

    value_type: T.DataType = field(default_factory=T.LongType)
    reduce: ColumnReduce | None = None
    py_reduce: Callable[[Any, Any], Any] | None = None
    state_type: KeyedStateType = field(init=False, default=KeyedStateType.REDUCING)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_type(self.name, "value_type", self.value_type)
        if self.reduce is None and self.py_reduce is None:
            raise StateDescriptorError(f"reducing state {self.name!r} needs reduce= or py_reduce=")
        _check_callables(self.name, reduce=self.reduce, py_reduce=self.py_reduce)

    @property
    def stored_type(self) -> T.DataType:
        return self.value_type


@dataclass(frozen=True)
class AggregatingStateDescriptor(KeyedStateDescriptor):
    """Flink's AggregateFunction: create an accumulator, add inputs, get a result.

    Column forms: ``create() -> Column``, ``add(acc, x) -> Column``,
    ``result(acc) -> Column``. Python forms: ``py_create()``, ``py_add(acc, x)``,
    ``py_result(acc)``. The stored value is the accumulator.
    """

    input_type: T.DataType = field(default_factory=T.LongType)
    acc_type: T.DataType = field(default_factory=T.LongType)
    result_type: T.DataType = field(default_factory=T.LongType)
    create: Callable[[], Column] | None = None
    add: ColumnReduce | None = None
    result: Callable[[Column], Column] | None = None
    py_create: Callable[[], Any] | None = None
    py_add: Callable[[Any, Any], Any] | None = None
    py_result: Callable[[Any], Any] | None = None
    state_type: KeyedStateType = field(init=False, default=KeyedStateType.AGGREGATING)

    def __post_init__(self) -> None:
        super().__post_init__()
        for what in ("input_type", "acc_type", "result_type"):
            _check_type(self.name, what, getattr(self, what))
        column_form = (self.create, self.add, self.result)
        python_form = (self.py_create, self.py_add, self.py_result)
        if not all(f is not None for f in column_form) and not all(f is not None for f in python_form):
            raise StateDescriptorError(
                f"aggregating state {self.name!r} needs create/add/result (Column functions) "
                "or py_create/py_add/py_result (Python functions)"
            )
        _check_callables(self.name, create=self.create, add=self.add, result=self.result, py_create=self.py_create,
                         py_add=self.py_add, py_result=self.py_result)

    @property
    def stored_type(self) -> T.DataType:
        return self.acc_type


@dataclass(frozen=True)
class OperatorStateDescriptor:
    """Operator (non-keyed) state: a list per subtask, or a broadcast map."""

    name: str
    value_type: T.DataType = field(default_factory=T.StringType)
    mode: OperatorStateMode = OperatorStateMode.SPLIT_DISTRIBUTE
    map_key_type: T.DataType = field(default_factory=T.StringType, kw_only=True)

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_type(self.name, "value_type", self.value_type)
        _check_type(self.name, "map_key_type", self.map_key_type)


def ListOperatorState(name: str, value_type: T.DataType) -> OperatorStateDescriptor:  # noqa: N802
    """Split-distribute list state (Flink ``getListState``)."""
    return OperatorStateDescriptor(name, value_type, OperatorStateMode.SPLIT_DISTRIBUTE)


def UnionListOperatorState(name: str, value_type: T.DataType) -> OperatorStateDescriptor:  # noqa: N802
    """Union list state (Flink ``getUnionListState``)."""
    return OperatorStateDescriptor(name, value_type, OperatorStateMode.UNION)


def BroadcastState(name: str, key_type: T.DataType, value_type: T.DataType) -> OperatorStateDescriptor:  # noqa: N802
    """Broadcast map state (Flink ``getBroadcastState``)."""
    return OperatorStateDescriptor(name, value_type, OperatorStateMode.BROADCAST, map_key_type=key_type)
