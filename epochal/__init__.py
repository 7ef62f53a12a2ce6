"""epochal: checkpointed, stateful, batch-incremental pipelines on PySpark and Delta Lake.

``import epochal`` is the public API a pipeline package imports (DESIGN section 7)::

    import epochal
    from epochal import Pipeline, HourlyFolderSource, SinkSpec, SinkMode, ValueStateDescriptor

Everything else (``epochal.state``, ``epochal.pipeline``, ``epochal.orchestration``,
``epochal.config``) is internal and may change. The names below are resolved on first
use, so ``import epochal`` stays cheap for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    # pipelines, sources, sinks, stages
    "Pipeline": "epochal.pipeline.dag",
    "Source": "epochal.pipeline.sources",
    "SourceBatch": "epochal.pipeline.sources",
    "HourlyFolderSource": "epochal.pipeline.sources",
    "SinkSpec": "epochal.pipeline.stage",
    "SinkMode": "epochal.pipeline.stage",
    "Stage": "epochal.pipeline.stage",
    "StageContext": "epochal.pipeline.stage",
    "EpochInfo": "epochal.pipeline.stage",
    # keyed state
    "ValueStateDescriptor": "epochal.state.descriptors",
    "ListStateDescriptor": "epochal.state.descriptors",
    "MapStateDescriptor": "epochal.state.descriptors",
    "ReducingStateDescriptor": "epochal.state.descriptors",
    "AggregatingStateDescriptor": "epochal.state.descriptors",
    "StateTtlConfig": "epochal.state.descriptors",
    "TtlUpdateType": "epochal.state.descriptors",
    "KeyedProcessFunction": "epochal.state.backends.per_key",
    "run_keyed_process": "epochal.state.backends.per_key",
    "EventTimeTimers": "epochal.state.backends.timers",
    # operator state
    "OperatorStateDescriptor": "epochal.state.descriptors",
    "OperatorStateMode": "epochal.state.descriptors",
    "ListOperatorState": "epochal.state.descriptors",
    "UnionListOperatorState": "epochal.state.descriptors",
    "BroadcastState": "epochal.state.descriptors",
    "CheckpointedFunction": "epochal.state.backends.operator",
    "FunctionInitializationContext": "epochal.state.backends.operator",
    "FunctionSnapshotContext": "epochal.state.backends.operator",
    "run_subtask_process": "epochal.state.backends.operator",
    # frames
    "empty_frame": "epochal.state.frames",
    # configuration and errors
    "Settings": "epochal.config",
    "load_settings": "epochal.config",
    "ConfigError": "epochal.config",
    "EpochalError": "epochal.errors",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'epochal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from epochal.config import ConfigError, Settings, load_settings
    from epochal.errors import EpochalError
    from epochal.pipeline.dag import Pipeline
    from epochal.pipeline.sources import HourlyFolderSource, Source, SourceBatch
    from epochal.pipeline.stage import EpochInfo, SinkMode, SinkSpec, Stage, StageContext
    from epochal.state.descriptors import (
        AggregatingStateDescriptor,
        BroadcastState,
        ListOperatorState,
        ListStateDescriptor,
        MapStateDescriptor,
        OperatorStateDescriptor,
        OperatorStateMode,
        ReducingStateDescriptor,
        StateTtlConfig,
        TtlUpdateType,
        UnionListOperatorState,
        ValueStateDescriptor,
    )
    from epochal.state.backends.operator import (
        CheckpointedFunction,
        FunctionInitializationContext,
        FunctionSnapshotContext,
        run_subtask_process,
    )
    from epochal.state.backends.per_key import KeyedProcessFunction, run_keyed_process
    from epochal.state.backends.timers import EventTimeTimers
    from epochal.state.frames import empty_frame
