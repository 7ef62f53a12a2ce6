"""The Delta-backed completed-checkpoint store, and the production wiring end to end (few, small)."""

from __future__ import annotations

import pytest

from epochal.config.models import CheckpointSettings
from epochal.state.checkpoint.clock import ManualClock
from epochal.state.checkpoint.completed import RetentionStatus
from epochal.state.checkpoint.factory import create_coordinator
from epochal.state.checkpoint.store import DeltaCompletedCheckpointStore
from epochal.state.delta.paths import to_spark
from epochal.state.checkpoint.testing import make_handle
from tests.state.checkpoint.test_checkpoint_store import completed, store_contract

pytestmark = pytest.mark.timeout(600)


def test_delta_store_contract_and_reopen(spark, tmp_path) -> None:
    url = f"file://{tmp_path}/completed"
    store = DeltaCompletedCheckpointStore(spark, url, max_retained=2)
    store_contract(store)
    reopened = DeltaCompletedCheckpointStore(spark, url, max_retained=2)
    assert [c.checkpoint_id for c in reopened.all()] == [4, 5]
    assert reopened.get(5) == store.get(5) and reopened.get(5).metadata == completed(5).metadata
    rows = spark.read.format("delta").load(to_spark(url)).orderBy("checkpoint_id").collect()
    assert [(r.checkpoint_id, r.kind, r.status, r.retained) for r in rows] == [
        (1, "checkpoint", "released", False), (2, "checkpoint", "subsumed", False), (3, "savepoint", "released", False),
        (4, "checkpoint", "retained", True), (5, "checkpoint", "retained", True),
    ]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{to_spark(url)}`").select("version", "operation", "engineInfo").collect()
    adds = [r for r in history if r.operation == "MERGE"]
    assert len(adds) == 7, "each add, remove and release is one MERGE commit (the duplicate add none)"
    assert all(r.engineInfo.startswith("delta-rs") for r in history), "written without Spark"


def test_delta_store_writes_a_spark_created_table_and_keeps_its_log_short(spark, tmp_path) -> None:
    """A store table created by Spark (deployments before delta-rs wrote the store) takes delta-rs's MERGEs;
    every tenth version is a Delta checkpoint that Spark, delta-rs and the store's own log replay all read."""
    from deltalake import DeltaTable

    from epochal.state.checkpoint.store import _SCHEMA

    url = f"file://{tmp_path}/completed"
    spark.createDataFrame([], schema=_SCHEMA).write.format("delta").save(to_spark(url))
    spark.sql(f"ALTER TABLE delta.`{to_spark(url)}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1000')")
    store = DeltaCompletedCheckpointStore(spark, url, max_retained=1)
    for checkpoint_id in range(1, 13):
        store.add(completed(checkpoint_id))
    assert (tmp_path / "completed" / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert not (tmp_path / "completed" / "_delta_log" / f"{11:020d}.checkpoint.parquet").exists()
    reopened = DeltaCompletedCheckpointStore(None, url, max_retained=1)
    assert [c.checkpoint_id for c in reopened.all()] == [12] and reopened.known_ids() == list(range(1, 13))
    assert spark.read.format("delta").load(to_spark(url)).where("retained").count() == 1
    assert DeltaTable(url).to_pyarrow_table().num_rows == 12


def test_production_wiring_end_to_end(spark, tmp_path) -> None:
    settings = CheckpointSettings(dir=str(tmp_path / "checkpoints"), retain=2, timeout_s=30, tolerable_failures=1)
    clock = ManualClock()
    coordinator = create_coordinator(settings, spark=spark, clock=clock)
    tasks = ("dedupe", "sink")
    for epoch in range(3):
        pending = coordinator.trigger(epoch, tasks, {"window": epoch}).pending
        clock.advance(1)
        coordinator.acknowledge(pending.checkpoint_id, "dedupe", epoch, [make_handle("dedupe", version=epoch)])
        completion = coordinator.acknowledge(pending.checkpoint_id, "sink", epoch).completion
        assert completion.succeeded
    assert [c.checkpoint_id for c in completion.subsumed] == [1]
    savepoint = coordinator.trigger_savepoint(2, tasks, {"window": 2}, name="nightly").pending
    for task in tasks:
        completion = coordinator.acknowledge(savepoint.checkpoint_id, task, 2)
    assert (tmp_path / "checkpoints" / "savepoints" / "nightly" / "_metadata").exists()

    restarted = create_coordinator(settings, spark=spark, clock=clock)
    assert restarted.restore().checkpoint_id == 4
    assert restarted.restore("chk-3").metadata.source_positions == {"window": 2}
    assert restarted.resolve(str(tmp_path / "checkpoints" / "savepoints" / "nightly")).is_savepoint
    assert restarted.store.get(1).status is RetentionStatus.SUBSUMED
    assert [s.checkpoint_id for s in restarted.stats.history()] == [1, 2, 3, 4]
    assert restarted.trigger(3, tasks).checkpoint_id == 5, "ids are durable across processes"
