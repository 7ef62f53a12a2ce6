"""Epochs, backfills, restores and savepoints as Dagster runs (in process, the test session's SparkSession).

The toy pipeline (tests/support/toy_pipeline.py) keeps these fast; the clickstream goes
through the real webserver and daemon in tests/orchestration/test_dagster_live.py.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.orchestration.definitions import build_definitions
from epochal.state.checkpoint.failure import FailureState, StorageFailureStateRepository
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.checkpoint.storage import CheckpointStorage

HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)], [("b", 5)]]
KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]


@pytest.fixture()
def deployment(tmp_path: Path, spark):
    from epochal.pipeline.registry import PIPELINES

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


def run_epoch_dying_at(dies: int):
    """``EpochRunner.run_epoch`` that raises at epoch ``dies`` (an executor lost), for monkeypatching."""
    from epochal.pipeline.runner import EpochRunner

    original = EpochRunner.run_epoch

    def run_epoch(self, epoch, **kwargs):
        if epoch == dies:
            raise RuntimeError("executor lost (test)")
        return original(self, epoch, **kwargs)

    return run_epoch


def _run(defs, instance, key, tags=None):
    result = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=key, instance=instance, tags=tags or {})
    assert result.success
    return result


def _configure(config: Path, **checkpoints) -> None:
    """Change the checkpoints section of the deployment's YAML (each run reads it again)."""
    doc = yaml.safe_load(config.read_text())
    doc["checkpoints"].update(checkpoints)
    config.write_text(yaml.safe_dump(doc))


def _fail_pipeline(config: Path, detail: str = "earlier") -> StorageFailureStateRepository:
    """What the failure manager leaves when it gives up: a failed pipeline, with its reason."""
    repository = StorageFailureStateRepository(CheckpointStorage(load_settings(config).checkpoints.dir))
    failure = CheckpointFailure(checkpoint_id=None, reason=CheckpointFailureReason.TASK_FAILURE, detail=detail, at="2026-11-01T00:00:00Z")
    repository.save(FailureState(failures=(failure,), failed=True))
    return repository


def _failure(result) -> str:
    """The description of the run's dg.Failure (None when it failed with a raw exception)."""
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    data = event.step_failure_data.user_failure_data
    return None if data is None else data.description


def _failure_error(result):
    """The error Dagster recorded for the run's failed step: what its log and UI print under the message."""
    (event,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return event.step_failure_data.error


def _checks(result) -> dict[str, object]:
    return {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
            for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}


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
            assert isinstance(checkpoint["checkpoint_duration_s"].value, float) and checkpoint["checkpoint_duration_s"].value > 0
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
        assert any(m.startswith("savepoint before-rollback (id ") and m.endswith(path) for m in _logged(instance, saved))

        restored = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"checkpoint": 1}}}})
        assert restored.success
        assert _totals(spark, config) == _expected(1)
        assert any(m.startswith("restored checkpoint 1 (epoch ") for m in _logged(instance, restored))
        events = instance.fetch_observations(dg.AssetKey("sum"), limit=10).records
        assert any(r.asset_observation.metadata["action"].value.startswith("restore of the checkpoint 1") for r in events)

        back = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"savepoint": path}}}})
        assert back.success
        assert _totals(spark, config) == {**_expected(3), "e": 4}


def _logged(instance, result) -> list[str]:
    """The messages the run's ops logged (``context.log``)."""
    return [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None]


def test_a_manual_run_clears_a_failed_pipeline(deployment):
    defs, config = deployment
    repository = _fail_pipeline(config)
    with dg.instance_for_test() as instance:
        result = _run(defs, instance, KEYS[0])
    assert _materializations(result)["checkpoint"][0].metadata["checkpoint_status"].value == "completed"
    assert not repository.load().failed


def test_a_scheduled_run_of_a_failed_pipeline_fails_with_the_reason_and_its_reexecution_is_manual(deployment):
    defs, config = deployment
    repository = _fail_pipeline(config)
    scheduled = {"dagster/schedule_name": "toy_every_window"}
    with dg.instance_for_test() as instance:
        refused = defs.resolve_job_def("toy_epochs").execute_in_process(
            partition_key=KEYS[0], instance=instance, tags=scheduled, raise_on_error=False)
        assert not refused.success and not _materializations(refused)
        message = _failure(refused)
        assert "is failed" in message and "earlier" in message and "'restore' job" in message
        assert repository.load().failed
        # Dagster copies the schedule's tag onto a re-execution or retry (with dagster/parent_run_id): an operator's run.
        again = _run(defs, instance, KEYS[0], {**scheduled, "dagster/parent_run_id": refused.run_id})
    assert _materializations(again)["checkpoint"][0].metadata["checkpoint_status"].value == "completed"
    assert not repository.load().failed


def test_a_failed_manual_run_leaves_the_pipeline_failed_and_the_schedule_paused(deployment, monkeypatch):
    defs, config = deployment
    repository = _fail_pipeline(config)

    def boom(self, ctx, inputs):
        raise RuntimeError("boom in sum")

    monkeypatch.setattr(toy.Sum, "process", boom)
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=KEYS[0], instance=instance, raise_on_error=False)
        assert not result.success and "boom in sum" in _failure(result)
        cause = _failure_error(result).cause  # the user's own exception, with the traceback into their code
        assert cause is not None and cause.cls_name == "RuntimeError" and "boom in sum" in cause.message, cause
        assert "in boom" in "".join(cause.stack), cause.stack
        state = repository.load()
        assert state.failed and state.failures[0].detail == "earlier"  # put back, with this run's failures after it
        with dg.build_schedule_context(instance=instance, resources={"checkpoints": defs.resources["checkpoints"]},
                                       scheduled_execution_time=datetime(2026, 11, 1, 5, tzinfo=timezone.utc)) as context:
            tick = defs.resolve_schedule_def("toy_every_window").evaluate_tick(context)
    assert not tick.run_requests and "earlier" in tick.skip_message


def test_checkpoint_complete_fails_when_this_epochs_checkpoint_is_declined(deployment):
    defs, config = deployment
    _configure(config, min_pause_s=3600)  # the second checkpoint comes too soon after the first
    with dg.instance_for_test() as instance:
        first, second = (_run(defs, instance, key) for key in KEYS[:2])
    assert _checks(first)["checkpoint_complete"].passed
    assert _materializations(second)["checkpoint"][0].metadata["checkpoint_status"].value == "declined"
    check = _checks(second)["checkpoint_complete"]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert "declined" in check.description and "MINIMUM_TIME_BETWEEN_CHECKPOINTS" in check.description


def test_checkpoint_complete_passes_when_no_checkpoint_is_due_by_interval(deployment):
    defs, config = deployment
    _configure(config, interval_epochs=2)  # epoch 0 takes none: not a failure
    with dg.instance_for_test() as instance:
        result = _run(defs, instance, KEYS[0])
    assert _materializations(result)["checkpoint"][0].metadata["checkpoint_status"].value == "none"
    assert _checks(result)["checkpoint_complete"].passed


def test_restore_and_savepoint_jobs_fail_with_one_message_saying_what_to_do(deployment, tmp_path):
    defs, _ = deployment

    def restore(**config):
        return defs.resolve_job_def("restore").execute_in_process(
            instance=instance, raise_on_error=False, run_config={"ops": {"restore_state": {"config": config}}})

    def savepoint(name):
        return defs.resolve_job_def("savepoint").execute_in_process(
            instance=instance, raise_on_error=False, run_config={"ops": {"take_savepoint": {"config": {"name": name}}}})

    with dg.instance_for_test() as instance:
        for result, words in [
            (restore(checkpoint=99), ["99", "Operator action"]),
            (restore(savepoint=str(tmp_path / "no-such-savepoint")), ["no-such-savepoint", "Operator action"]),
            (restore(parallelism=0), ["Parallelism", "Operator action", "parallelism is between 1"]),
            (savepoint("../escape"), ["../escape", "Operator action"]),
        ]:
            assert not result.success
            message = _failure(result)
            assert message is not None and all(w in message for w in words), message
            error = _failure_error(result)  # one message: no chained exception of epochal's own beneath it
            assert error.cause is None and error.context is None, error.to_string()
        _run(defs, instance, KEYS[0])
        assert savepoint("twice").success
        again = savepoint("twice")
        assert not again.success and "already exists" in _failure(again)


def test_a_restore_marks_later_partitions_out_of_date_wiping_them_before_recording_it(deployment, spark, monkeypatch):
    defs, config = deployment
    with dg.instance_for_test() as instance:
        for key in KEYS[:2]:
            _run(defs, instance, key)
        wiped: list[tuple[str, list[str], int]] = []

        def wipe(asset_key, partition_keys):  # an event log that can wipe (not SQLite): record what was there
            wiped.append((asset_key.to_user_string(), list(partition_keys), len(_out_of_date(instance))))

        monkeypatch.setattr(instance, "wipe_asset_partitions", wipe)
        restored = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"checkpoint": 1}}}})
        assert restored.success
        assert [o.partition for o in _out_of_date(instance)] == [KEYS[1]]
    assert {asset for asset, _, _ in wiped} == {"read", "sum", "totals", "log", "checkpoint"}
    assert all(keys == [KEYS[1]] and seen == 0 for _, keys, seen in wiped)  # wiped before the observations
    assert _totals(spark, config) == _expected(1)


def _out_of_date(instance) -> list:
    records = instance.fetch_observations(dg.AssetKey("checkpoint"), limit=50).records
    return [r.asset_observation for r in records if "out_of_date" in r.asset_observation.metadata]


def test_a_run_out_of_order_fails_with_the_partition_to_run_first(deployment):
    defs, _ = deployment
    with dg.instance_for_test() as instance:
        _run(defs, instance, KEYS[0])
        result = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=KEYS[2], instance=instance, raise_on_error=False)
    # Not a backfill and not the next partition: a scheduled/catch-up run continues in order up to it.
    assert result.success
    epochs = sorted(m.partition for m in _materializations(result)["checkpoint"])
    assert epochs == [KEYS[1], KEYS[2]]


@pytest.mark.parametrize("tag", ["2026-11-01-00:30", "2026-10-31-23:00"])
def test_a_run_tagged_with_a_partition_dagster_does_not_offer_fails_before_any_epoch(deployment, tag):
    """Dagster reads a run's partition tag leniently (found from outside: a daily run tagged ``2026-11-05-17:30``
    ran 2026-11-06 and recorded its checks on the tag) or fails with a CheckError and its traceback."""
    defs, config = deployment
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("toy_epochs").execute_in_process(
            instance=instance, tags={"dagster/partition": tag}, raise_on_error=False)
    assert not result.success
    assert _failure(result).startswith(f"run tag dagster/partition={tag}: "), _failure(result)
    assert not result.get_asset_materialization_events()
    assert not (Path(load_settings(config).checkpoints.dir) / "progress.json").exists()


def test_a_catch_up_epoch_is_reported_as_it_ends_with_its_checks_even_when_the_run_dies_after_it(deployment, monkeypatch):
    """A run for a partition past the next one runs the epochs before it first (a schedule that missed windows).
    Each is reported as it ends, its check results as evaluations of its own partition: the run that dies at the
    last epoch leaves the one it finished materialized (found from outside: it was reported at the run's end,
    so a killed run left it unmaterialized for good, and its checks were never reported)."""
    from epochal.pipeline.runner import EpochRunner

    defs, _ = deployment
    original = EpochRunner.run_epoch
    with dg.instance_for_test() as instance:
        _run(defs, instance, KEYS[0])
        monkeypatch.setattr(EpochRunner, "run_epoch", run_epoch_dying_at(2))
        died = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=KEYS[2], instance=instance, raise_on_error=False)
        assert not died.success
        materialized = [e.dagster_event.event_specific_data.materialization  # as the instance stored them
                        for e in instance.all_logs(died.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)]
        assert sorted(m.partition for m in materialized if m.asset_key.to_user_string() == "checkpoint") == [KEYS[1]]
        evaluations = [e.dagster_event.event_specific_data
                       for e in instance.all_logs(died.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
        checks = sorted((c.check_name, c.partition, c.passed) for c in evaluations)
        assert checks == [("checkpoint_complete", KEYS[1], True), ("state_consistent", KEYS[1], True)]
        monkeypatch.setattr(EpochRunner, "run_epoch", original)
        again = defs.resolve_job_def("toy_epochs").execute_in_process(partition_key=KEYS[2], instance=instance)
    partitions = {(e.asset_check_evaluation_data.check_name, e.asset_check_evaluation_data.partition)
                  for e in again.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert partitions == {("checkpoint_complete", KEYS[2]), ("state_consistent", KEYS[2])}  # its own partition too
