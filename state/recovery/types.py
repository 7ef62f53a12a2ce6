"""Inputs and results of a restore: the states the code declares, and what was restored."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any
from pydantic import BaseModel, ConfigDict
from pyspark.sql import types as T
from epochal.state.checkpoint.hooks import MasterTriggerRestoreHook
from epochal.state.checkpoint.metadata import CheckpointKind, SinkPosition
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.descriptors import KeyedStateDescriptor, OperatorStateDescriptor, OperatorStateMode
from epochal.state.handles import StateHandle, StateKind
from epochal.state.backends.keyed import KeyedStateBackend
from epochal.state.backends.keyed_table import keyed_table_schema, recorded_properties
from epochal.state.errors import StateMigrationError
from epochal.state.backends.operator import PROP_MODE, PROP_VALUE_TYPE, OperatorStateBackend, operator_table_schema


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class StateTarget:
    """One state as the current code declares it, and the working table it lives in."""

    stage: str
    descriptor: KeyedStateDescriptor | OperatorStateDescriptor
    working_path: str
    max_parallelism: int | None = None  # keyed state only

    @classmethod
    def keyed(cls, backend: KeyedStateBackend, descriptor: KeyedStateDescriptor) -> StateTarget:
        return cls(backend.stage, descriptor, backend.table_path(descriptor), backend.max_parallelism)

    @classmethod
    def operator(cls, backend: OperatorStateBackend, descriptor: OperatorStateDescriptor) -> StateTarget:
        return cls(backend.stage, descriptor, backend.table_path(descriptor))

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.descriptor.name}"

    @property
    def is_keyed(self) -> bool:
        return isinstance(self.descriptor, KeyedStateDescriptor)

    def declared_schema(self) -> T.StructType:
        if isinstance(self.descriptor, KeyedStateDescriptor):
            return keyed_table_schema(self.descriptor)
        return operator_table_schema(self.descriptor)

    def declared_properties(self) -> dict[str, str]:
        """The ``epochal.*`` properties the state backends check when they open the table."""
        d = self.descriptor
        if isinstance(d, KeyedStateDescriptor):
            return recorded_properties(d, self.max_parallelism)
        return {PROP_MODE: d.mode.value, PROP_VALUE_TYPE: d.value_type.json()}

    def check_kind(self, handle: StateHandle) -> None:
        """The snapshot must be the same kind of state (keyed value/list/..., or operator mode)."""
        d = self.descriptor
        if isinstance(d, KeyedStateDescriptor):
            expected_kind, expected_type = StateKind.KEYED, d.state_type.value
        else:
            broadcast = d.mode is OperatorStateMode.BROADCAST
            expected_kind, expected_type = (StateKind.BROADCAST if broadcast else StateKind.OPERATOR), d.mode.value
        if handle.kind is not expected_kind or handle.state_type != expected_type:
            raise StateMigrationError(
                f"State {self.key} was checkpointed as {handle.kind.value} {handle.state_type} state; "
                f"the current descriptor declares {expected_kind.value} {expected_type} state.",
                action="keep the state's type, or give the new state another name "
                "(the old one is then dropped with --allow-non-restored-state).",
                state=self.key,
            )


@dataclass(frozen=True)
class CheckpointSource:
    """Where checkpoints are found when no coordinator is at hand (tools, tests)."""

    storage: CheckpointStorage
    store: CompletedCheckpointStore
    hooks: Sequence[MasterTriggerRestoreHook] = ()


# ---------------------------------------------------------------------------- results


class RestoreAction(str, Enum):
    UNCHANGED = "unchanged"  # the working table already was at the snapshot's version
    DELTA_RESTORE = "delta_restore"  # Delta RESTORE of the working table to the snapshot's version
    COPY = "copy"  # the working table overwritten with the snapshot (a copy, or a schema migration)
    EMPTIED = "emptied"  # the checkpoint holds no such state: the working table was emptied


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RestoredState(_Frozen):
    stage: str
    state: str
    action: RestoreAction
    working_path: str
    working_version: int | None = None  # the working table's version after the restore
    kind: StateKind | None = None
    source_path: str | None = None
    source_version: int | None = None
    rows: int | None = None
    migrated_columns: tuple[str, ...] = ()
    parallelism_before: int | None = None
    parallelism_after: int | None = None

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.state}"


class SkippedCheckpoint(_Frozen):
    checkpoint_id: int
    metadata_path: str
    reason: str


class RestoreResult(_Frozen):
    """What a restore did: which checkpoint, its position, each state, the fallbacks taken."""

    checkpoint_id: int | None
    epoch: int | None
    kind: CheckpointKind | None = None
    metadata_path: str | None = None
    source_positions: dict[str, Any] = {}
    parallelism: int | None = None
    states: tuple[RestoredState, ...] = ()
    skipped: tuple[SkippedCheckpoint, ...] = ()
    not_restored: tuple[str, ...] = ()  # states in the checkpoint that no target claimed
    sinks: tuple[SinkPosition, ...] = ()  # each sink's table version at the restored epoch (to rewind them to)

    @property
    def started_empty(self) -> bool:
        return self.checkpoint_id is None

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)

    def state(self, stage: str, state: str) -> RestoredState | None:
        return next((s for s in self.states if s.stage == stage and s.state == state), None)
