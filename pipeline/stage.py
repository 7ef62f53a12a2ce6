"""Stages and sinks: the nodes of a pipeline DAG (Flink's operators and sinks).

A stage is a PySpark transformation with a name, named inputs (a source's name
or another stage's output, ``"<stage>"`` or ``"<stage>.<output>"``), named
outputs, and the state it declares. The runner gives it a
:class:`StageContext` per epoch: the epoch and its window, the stage's keyed
state backend (already at this epoch's clock) and its operator state store.

A stateful stage writes its state through those backends during ``process``;
the runner snapshots the declared states at the epoch boundary and acks them
to the coordinator. ``initialize_state`` / ``snapshot_state`` are Flink's
``CheckpointedFunction`` hooks, called on start/restore and at each epoch's
end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from epochal.state.descriptors import KeyedStateDescriptor, OperatorStateDescriptor
from epochal.state.backends.keyed import KeyedStateBackend
from epochal.state.backends.values import contains_map
from epochal.state.backends.operator import FunctionInitializationContext, FunctionSnapshotContext, OperatorStateStore


@dataclass(frozen=True)
class EpochInfo:
    """One epoch: its index (from ``partitions.start``), its partition key and window."""

    epoch: int
    partition: str
    window_start: datetime
    window_end: datetime

    @property
    def clock(self) -> datetime:
        """The epoch clock (TTL, processing time): the end of the window."""
        return self.window_end


@dataclass
class StageContext:
    """What a stage sees while processing one epoch."""

    spark: SparkSession
    info: EpochInfo
    keyed: KeyedStateBackend
    operator: OperatorStateStore
    parallelism: int
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The stage's outputs that no stage and no sink of the pipeline reads (the runner fills it in).
    unread: frozenset[str] = frozenset()

    @property
    def epoch(self) -> int:
        return self.info.epoch

    def is_read(self, output: str) -> bool:
        """Whether a stage or a sink reads ``output`` of this stage: a stage may skip work that serves only
        outputs nobody reads (caching a frame for two consumers, say). Its return value still names every output."""
        return output not in self.unread

    @property
    def partition(self) -> str:
        return self.info.partition


@runtime_checkable
class Stage(Protocol):
    """A node of the pipeline DAG."""

    name: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    keyed_state: Sequence[KeyedStateDescriptor]
    operator_state: Sequence[OperatorStateDescriptor]

    def process(self, ctx: StageContext, inputs: Mapping[str, DataFrame]) -> Mapping[str, DataFrame]:
        """Compute this epoch's outputs (keyed by output name) from its inputs (keyed by input name)."""
        ...


class CheckpointedStage(Protocol):
    """Optional hooks of a stage (Flink's ``CheckpointedFunction``)."""

    def initialize_state(self, context: FunctionInitializationContext) -> None: ...

    def snapshot_state(self, context: FunctionSnapshotContext) -> None: ...


class MaterializedStage(Protocol):
    """A stage whose output is a view of its state (an upsert sink can be rebuilt from it on restore)."""

    def view(self, ctx: StageContext, output: str) -> DataFrame:
        """The full current content of ``output`` computed from the stage's state."""
        ...


class SinkMode(str, Enum):
    APPEND = "append"  # rows of an epoch replace that epoch's rows: idempotent on replay
    UPSERT = "upsert"  # MERGE on natural keys of full values: idempotent on replay


@dataclass(frozen=True)
class SinkSpec:
    """A Delta table under ``<warehouse>/<name>`` fed by one stage output."""

    name: str
    input: str
    mode: SinkMode
    schema: T.StructType
    keys: tuple[str, ...] = ()
    #: UPSERT only: a boolean column of the input whose true rows delete their key (Flink's ``RowKind.DELETE``).
    delete_column: str | None = None

    def __post_init__(self) -> None:
        if self.mode is SinkMode.UPSERT and not self.keys:
            raise ValueError(f"upsert sink {self.name!r} needs keys=")
        columns = [f.name for f in self.schema.fields]
        unknown = [k for k in self.keys if k not in columns]
        if unknown:
            raise ValueError(f"sink {self.name!r}: key(s) {unknown} are not columns of its schema {columns}")
        maps = [f.name for f in self.schema.fields if f.name in self.keys and contains_map(f.dataType)]
        if maps:
            raise ValueError(f"sink {self.name!r}: key(s) {maps} hold a map, which Spark cannot match rows on; "
                             "key the sink by other columns (a map is fine as a value column)")
        if self.delete_column is not None and self.mode is not SinkMode.UPSERT:
            raise ValueError(f"sink {self.name!r}: delete_column= is for upsert sinks (an append sink keeps every row)")
        if self.delete_column is not None and self.delete_column in {f.name for f in self.schema.fields}:
            raise ValueError(f"sink {self.name!r}: delete_column {self.delete_column!r} is a column of the sink's "
                             "schema; it must be an extra column of the input (it is not stored)")
