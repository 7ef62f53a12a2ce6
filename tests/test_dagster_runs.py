"""Epochs, backfills, restores and savepoints as Dagster runs (in process, the test session's SparkSession).

The toy pipeline (tests/toy_pipeline.py) keeps these fast; the clickstream goes
through the real webserver and daemon in tests/test_dagster_live.py.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

import toy_pipeline as toy
from config import load_settings
from orchestration.definitions import build_definitions
from state.checkpoint.failure import FailureState, StorageFailureStateRepository
from state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from state.checkpoint.storage import CheckpointStorage

HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)], [("b", 5)]]
KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]


@pytest.fixture()
def deployment(tmp_path: Path, spark):
    from pipeline.registry import PIPELINES

    toy.register()
    for hour, rows in enumerate(HOURS):
        toy.write_hour(tmp_path / "landing", hour, rows)
    path = tmp_path / "epochal.yaml"
    path.write_text(yaml.safe_dump({
        "pipeline": "toy", "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints"), "retain": 3},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16, "shuffle_partitions": 2},
    }))
    yield build_definitions(load_settings(path), str(path)), path
    PIPELINES.pop("toy", None)


def _run(defs, instance, key, tags=None):
    result = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=key, instance=instance, tags=tags or {})
    assert result.success
    return result


def _materializations(result) -> dict[str, list]:
    out: dict[str, list] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        out.setdefault(mat.asset_key.to_user_string(), []).append(mat)
    return out


def _totals(spark, config: Path) -> dict[str, int]:
    settings = load_settings(config)
    return {r.key: r.total for r in spark.read.format("delta").load(f"{settings.warehouse}/totals").collect()}


def _expected(hours: int) -> dict[str, int]:
    totals: dict[str, int] = {}
    for rows in HOURS[:hours]:
        for key, n in rows:
            totals[key] = totals.get(key, 0) + n
    return totals


def test_epoch_runs_materialize_every_asset_with_numbers_and_pass_their_checks(deployment, spark):
    defs, config = deployment
    with dg.instance_for_test() as instance:
        results = [_run(defs, instance, key) for key in KEYS[:2]]
        for key, result in zip(KEYS, results):
            mats = _materializations(result)
            assert set(mats) == {"read", "sum", "totals", "log", "checkpoint"}
            assert all(m.partition == key for ms in mats.values() for m in ms)
            checkpoint = mats["checkpoint"][0].metadata
            assert checkpoint["checkpoint_status"].value == "completed"
            assert isinstance(checkpoint["checkpoint_id"].value, int) and checkpoint["bytes_written"].value > 0
            assert checkpoint["state_rows"].value >= 2
            assert Path(checkpoint["metadata_path"].value).name == "_metadata"
            assert "state_table/total" in mats["sum"][0].metadata
            checks = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data.passed
                      for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
            assert checks == {"checkpoint_complete": True, "state_consistent": True}
        ids = [_materializations(r)["checkpoint"][0].metadata["checkpoint_id"].value for r in results]
        assert ids == sorted(set(ids))
    assert _totals(spark, config) == _expected(2)


def test_backfill_restores_then_replays_in_order_and_restore_savepoint_jobs_record_events(deployment, spark):
    defs, config = deployment
    with dg.instance_for_test() as instance:
        for key in KEYS:
            _run(defs, instance, key)
        assert _totals(spark, config) == _expected(3)
        toy.write_hour(Path(load_settings(config).landing), 1, [("a", 10), ("c", 3), ("e", 4)])  # a late file

        backfill = {"dagster/backfill": "bf1"}
        first = _run(defs, instance, KEYS[1], backfill)
        observations = [e.event_specific_data.asset_observation for e in first.all_events if e.event_type_value == "ASSET_OBSERVATION"]
        assert {o.asset_key.to_user_string() for o in observations} == {"sum", "checkpoint"}
        assert observations[0].metadata["restored_epoch"].value == 0
        assert _totals(spark, config) == {**_expected(2), "e": 4}  # re-planned: the late file is read
        # Partition 2's output was rewound: it is recorded as out of date until the backfill reaches it.
        stale = [r.asset_observation for r in instance.fetch_observations(dg.AssetKey("checkpoint"), limit=20).records
                 if "out_of_date" in r.asset_observation.metadata]
        assert [o.partition for o in stale] == [KEYS[2]]
        _run(defs, instance, KEYS[2], backfill)
        assert _totals(spark, config) == {**_expected(3), "e": 4}

        saved = defs.resolve_job_def("savepoint").execute_in_process(
            instance=instance, run_config={"ops": {"take_savepoint": {"config": {"name": "before-rollback"}}}})
        assert saved.success
        path = saved.output_for_node("take_savepoint")["path"]
        assert Path(path.removeprefix("file://").removeprefix("file:"), "_metadata").exists()

        restored = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"checkpoint": 1}}}})
        assert restored.success
        assert _totals(spark, config) == _expected(1)
        events = instance.fetch_observations(dg.AssetKey("sum"), limit=10).records
        assert any(r.asset_observation.metadata["action"].value.startswith("restore of the checkpoint 1") for r in events)

        back = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"savepoint": path}}}})
        assert back.success
        assert _totals(spark, config) == {**_expected(3), "e": 4}


def test_a_manual_run_clears_a_failed_pipeline(deployment):
    defs, config = deployment
    storage = CheckpointStorage(load_settings(config).checkpoints.dir)
    failure = CheckpointFailure(checkpoint_id=None, reason=CheckpointFailureReason.TASK_FAILURE, detail="earlier", at="2026-11-01T00:00:00Z")
    StorageFailureStateRepository(storage).save(FailureState(failures=(failure,), failed=True))
    with dg.instance_for_test() as instance:
        result = _run(defs, instance, KEYS[0])
    assert _materializations(result)["checkpoint"][0].metadata["checkpoint_status"].value == "completed"
    assert not StorageFailureStateRepository(storage).load().failed


def test_a_run_out_of_order_fails_with_the_partition_to_run_first(deployment):
    defs, _ = deployment
    with dg.instance_for_test() as instance:
        _run(defs, instance, KEYS[0])
        result = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=KEYS[2], instance=instance, raise_on_error=False)
    # Not a backfill and not the next partition: a scheduled/catch-up run continues in order up to it.
    assert result.success
    epochs = sorted(m.partition for m in _materializations(result)["checkpoint"])
    assert epochs == [KEYS[1], KEYS[2]]
