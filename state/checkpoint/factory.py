"""Wiring: a coordinator from ``CheckpointSettings`` with durable or in-memory parts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from epochal.config.models import CheckpointSettings
from epochal.state.checkpoint.clock import Clock
from epochal.state.checkpoint.coordinator import CheckpointCoordinator, CoordinatorPolicy
from epochal.state.checkpoint.failure import CheckpointFailureManager, StorageFailureStateRepository
from epochal.state.checkpoint.hooks import MasterTriggerRestoreHook
from epochal.state.checkpoint.ids import FileIdCounter, InMemoryIdCounter
from epochal.state.checkpoint.stats import CheckpointStatsTracker, InMemoryStatsHistory, JsonLinesStatsHistory
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import DeltaCompletedCheckpointStore, InMemoryCompletedCheckpointStore
from epochal.state.checkpoint.survivors import highest_visible_id, rebuild_store


def create_coordinator(
    settings: CheckpointSettings,
    *,
    spark: Any,
    clock: Clock,
    hooks: Sequence[MasterTriggerRestoreHook] = (),
    savepoints_url: str | None = None,
    storage_options: dict[str, Any] | None = None,
    coordinator_cls: type[CheckpointCoordinator] = CheckpointCoordinator,
) -> CheckpointCoordinator:
    """The production coordinator: files under ``settings.dir``, the Delta store, durable ids, stats, failures.

    Savepoints go to ``savepoints_url``, else ``settings.savepoints_dir``, else ``<dir>/savepoints``.
    When the completed-checkpoint store is empty, the savepoints left under ``<dir>/savepoints`` are
    registered again, and new ids come after every id still visible (:mod:`epochal.state.checkpoint.survivors`).
    """
    storage = CheckpointStorage(settings.dir, savepoints_url or settings.savepoints_dir, storage_options)
    store = DeltaCompletedCheckpointStore(spark, storage.completed_store_url, settings.retain)
    rebuild_store(storage, store)  # the store was lost: the savepoints left are listed and restorable again
    return coordinator_cls(
        storage=storage,
        store=store,
        clock=clock,
        id_counter=FileIdCounter(storage.ids_url, storage_options, floor=lambda: highest_visible_id(storage, store)),
        stats=CheckpointStatsTracker(JsonLinesStatsHistory(storage), settings.stats_history),
        failures=CheckpointFailureManager(settings.tolerable_failures, StorageFailureStateRepository(storage)),
        hooks=hooks,
        policy=CoordinatorPolicy.from_settings(settings),
    )


def create_in_memory_coordinator(
    settings: CheckpointSettings,
    *,
    clock: Clock,
    hooks: Sequence[MasterTriggerRestoreHook] = (),
    base_url: str | None = None,
) -> CheckpointCoordinator:
    """A coordinator for tests: fsspec memory storage, in-memory store, ids, stats and failures."""
    storage = CheckpointStorage(base_url or f"memory://epochal-{uuid.uuid4().hex}/checkpoints")
    return CheckpointCoordinator(
        storage=storage,
        store=InMemoryCompletedCheckpointStore(settings.retain),
        clock=clock,
        id_counter=InMemoryIdCounter(),
        stats=CheckpointStatsTracker(InMemoryStatsHistory(), settings.stats_history),
        failures=CheckpointFailureManager(settings.tolerable_failures),
        hooks=hooks,
        policy=CoordinatorPolicy.from_settings(settings),
    )
