"""Checkpoints: storage, ids, pending and completed checkpoints, the store, stats,
failures, hooks and the coordinator (DESIGN sections 1 and 3).

The small parts are importable from their modules; the names most callers
need are re-exported here.
"""

from state.checkpoint.clock import Clock, ManualClock, SystemClock
from state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from state.checkpoint.coordinator import (
    Acknowledgement,
    CheckpointCoordinator,
    Completion,
    CoordinatorPolicy,
    TriggerResult,
)
from state.checkpoint.errors import (
    CheckpointError,
    CheckpointNotFound,
    CheckpointStorageError,
    CorruptMetadataError,
    PipelineFailed,
    UnsupportedMetadataVersion,
)
from state.checkpoint.factory import create_coordinator, create_in_memory_coordinator
from state.checkpoint.failure import CheckpointFailureManager
from state.checkpoint.hooks import MasterTriggerRestoreHook
from state.checkpoint.ids import CheckpointIdCounter, FileIdCounter, InMemoryIdCounter
from state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from state.checkpoint.pending import AckResult, PendingCheckpoint, PendingStatus
from state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from state.checkpoint.resolve import CheckpointResolver
from state.checkpoint.stats import CheckpointStats, CheckpointStatsTracker
from state.checkpoint.storage import CheckpointStorage, to_spark_path
from state.checkpoint.store import (
    CompletedCheckpointStore,
    DeltaCompletedCheckpointStore,
    InMemoryCompletedCheckpointStore,
)

__all__ = [
    "AckResult", "Acknowledgement", "CheckpointCoordinator", "CheckpointError", "CheckpointFailure",
    "CheckpointFailureManager", "CheckpointFailureReason", "CheckpointIdCounter", "CheckpointKind",
    "CheckpointMetadata", "CheckpointNotFound", "CheckpointResolver", "CheckpointStats", "CheckpointStatsTracker",
    "CheckpointStorage", "CheckpointStorageError", "Clock", "CompletedCheckpoint", "CompletedCheckpointStore",
    "Completion", "CoordinatorPolicy", "CorruptMetadataError", "DeltaCompletedCheckpointStore", "FileIdCounter",
    "InMemoryCompletedCheckpointStore", "InMemoryIdCounter", "ManualClock", "MasterTriggerRestoreHook",
    "PendingCheckpoint", "PendingStatus", "PipelineFailed", "RetentionStatus", "SystemClock", "TriggerResult",
    "UnsupportedMetadataVersion", "create_coordinator", "create_in_memory_coordinator", "to_spark_path",
]
