"""Checkpoints: storage, ids, pending and completed checkpoints, the store, stats,
failures, hooks and the coordinator (DESIGN sections 1 and 3).

The small parts are importable from their modules; the names most callers
need are re-exported here.
"""

from epochal.state.checkpoint.clock import Clock, ManualClock, SystemClock
from epochal.state.checkpoint.completed import CompletedCheckpoint, RetentionStatus
from epochal.state.checkpoint.coordinator import (
    Acknowledgement,
    CheckpointCoordinator,
    Completion,
    CoordinatorPolicy,
    TriggerResult,
)
from epochal.state.errors import (
    CheckpointError,
    CheckpointNotFound,
    CheckpointStorageError,
    CorruptMetadataError,
    PipelineFailed,
    UnsupportedMetadataVersion,
)
from epochal.state.checkpoint.factory import create_coordinator, create_in_memory_coordinator
from epochal.state.checkpoint.failure import CheckpointFailureManager
from epochal.state.checkpoint.hooks import MasterTriggerRestoreHook
from epochal.state.checkpoint.ids import CheckpointIdCounter, FileIdCounter, InMemoryIdCounter
from epochal.state.checkpoint.metadata import CheckpointKind, CheckpointMetadata
from epochal.state.checkpoint.pending import AckResult, PendingCheckpoint, PendingStatus
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.checkpoint.stats import CheckpointStats, CheckpointStatsTracker
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import (
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
    "UnsupportedMetadataVersion", "create_coordinator", "create_in_memory_coordinator",
]
