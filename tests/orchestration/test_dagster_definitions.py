"""The Dagster definitions without Spark: lineage, partitions, jobs, the schedule and the savepoint sensor.

Uses Dagster's own testing APIs (schedule and sensor contexts on a test instance).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest
import yaml

from epochal.config import load_settings
from epochal.orchestration.assets import CHECKPOINT, POOL, code_version
from epochal.orchestration.definitions import build_definitions, epoch_job_name
from epochal.pipeline.registry import build_pipeline
from epochal.state.checkpoint.failure import FailureState, StorageFailureStateRepository
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.reasons import CheckpointFailure, CheckpointFailureReason
from epochal.state.checkpoint.stats import CheckpointStats, JsonLinesStatsHistory, StatsStatus
from epochal.state.checkpoint.storage import CheckpointStorage

START = datetime(2026, 11, 1, tzinfo=timezone.utc)


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    path = tmp_path / "epochal.yaml"
    path.write_text(yaml.safe_dump({
        "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints")},
        "partitions": {"start": START.isoformat()},
        "dagster": {"savepoint_every_checkpoints": 3},
    }))
    return path


@pytest.fixture()
def defs(config: Path) -> dg.Definitions:
    return build_definitions(load_settings(config), str(config))


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    """Definitions, schedules and sensors must never start Spark."""
    import epochal.state.session

    def refuse(*_a, **_k):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(epochal.state.session, "build_spark_session", refuse)


def test_lineage_is_the_pipeline_dag_and_stateful_assets_depend_on_their_previous_partition(defs, config):
    graph = defs.resolve_asset_graph()
    pipeline = build_pipeline(load_settings(config))
    for stage in pipeline.stages:
        parents = {k.to_user_string() for k in graph.get(dg.AssetKey(stage.name)).parent_keys}
        expected = {ref.split(".")[0] for ref in stage.inputs}
        if stage.keyed_state or stage.operator_state:
            expected.add(stage.name)
        assert parents == expected, stage.name
    for sink in pipeline.sinks:
        assert {k.to_user_string() for k in graph.get(dg.AssetKey(sink.name)).parent_keys} == {sink.input.split(".")[0]}
    everything = {s.name for s in pipeline.stages} | {s.name for s in pipeline.sinks} | {CHECKPOINT}
    assert {k.to_user_string() for k in graph.get(dg.AssetKey(CHECKPOINT)).parent_keys} == everything

    dedupe = graph.get(dg.AssetKey("dedupe"))
    mapping = graph.get_partition_mapping(dedupe.key, dedupe.key)
    assert isinstance(mapping, dg.TimeWindowPartitionMapping)
    assert (mapping.start_offset, mapping.end_offset) == (-1, -1)


def test_one_epoch_is_one_unsubsettable_multi_asset_run_in_process(defs, config):
    graph = defs.resolve_asset_graph()
    pipeline = build_pipeline(load_settings(config))
    assets = {graph.get(dg.AssetKey(s.name)).assets_def for s in pipeline.stages}
    assert len(assets) == 1, "every stage, sink and the checkpoint are one multi-asset"
    (epoch,) = assets
    assert not epoch.can_subset
    assert epoch.op.pool == POOL
    assert epoch.partitions_def.get_first_partition_key() == "2026-11-01-00:00"
    for name in (epoch_job_name(pipeline.name), "restore", "savepoint"):
        assert defs.resolve_job_def(name).executor_def.name == "in_process"
    assert defs.resolve_job_def("restore").tags["epochal/deployment"] == "clickstream"


def test_definitions_load_from_the_config_named_by_the_environment(config, monkeypatch):
    import importlib

    import epochal.orchestration.definitions as module

    monkeypatch.setenv("EPOCHAL_CONFIG", str(config))
    loaded = importlib.reload(module).defs
    resource = loaded.resources["epochal"]
    assert resource.config_path == str(config)
    assert resource.checkpoints.dir == str(config.parent / "checkpoints")
    dg.Definitions.validate_loadable(loaded)


def _resources(defs) -> dict:
    return {"checkpoints": defs.resources["checkpoints"]}


def _schedule(defs):
    return defs.resolve_schedule_def("clickstream_every_window")


def test_schedule_runs_the_latest_closed_window(defs):
    schedule = _schedule(defs)
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    with dg.instance_for_test() as instance:
        at = START + timedelta(hours=5, minutes=0)
        with dg.build_schedule_context(instance=instance, resources=_resources(defs), repository_def=defs.get_repository_def(), scheduled_execution_time=at) as context:
            (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-01-04:00"
    assert request.run_key == "2026-11-01-04:00"


def test_schedule_stops_triggering_while_the_pipeline_is_failed_and_says_why(defs, config):
    storage = CheckpointStorage(str(config.parent / "checkpoints"))
    failure = CheckpointFailure(checkpoint_id=7, reason=CheckpointFailureReason.TASK_FAILURE, detail="boom in dedupe", at=START)
    StorageFailureStateRepository(storage).save(FailureState(failures=(failure,), failed=True))
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(instance=instance, resources=_resources(defs), repository_def=defs.get_repository_def(), scheduled_execution_time=START + timedelta(hours=3)) as context:
            result = _schedule(defs).evaluate_tick(context)
        assert not result.run_requests
        message = result.skip_message
    assert "failed" in message and "boom in dedupe" in message and "restore" in message

    StorageFailureStateRepository(storage).save(FailureState())  # what a restore or a manual run does
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(instance=instance, resources=_resources(defs), repository_def=defs.get_repository_def(), scheduled_execution_time=START + timedelta(hours=3)) as context:
            assert len(_schedule(defs).evaluate_tick(context).run_requests) == 1


def _completed(storage: CheckpointStorage, ids: list[int]) -> None:
    history = JsonLinesStatsHistory(storage)
    entries = history.load() + [
        CheckpointStats(checkpoint_id=i, epoch=i, kind=CheckpointKind.CHECKPOINT, status=StatsStatus.COMPLETED,
                        triggered_at=START, finished_at=START, duration_s=1.0, tasks=3, acknowledged=3)
        for i in ids
    ]
    history.save(entries)


def _tick(sensor, instance, cursor, resources):
    # A context given resources holds them (and the instance's scope) until closed: used as a context manager, as
    # Dagster's docs do, it leaves no instance behind for the next test's definitions to find.
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
        result = sensor.evaluate_tick(context)
    return result, result.cursor


def test_savepoint_sensor_fires_once_per_reason(defs, config):
    storage = CheckpointStorage(str(config.parent / "checkpoints"))
    resources = _resources(defs)
    with dg.instance_for_test() as instance:
        sensor = defs.resolve_sensor_def("clickstream_savepoints")
        result, cursor = _tick(sensor, instance, None, resources)
        assert not result.run_requests  # nothing completed yet; the code version is recorded

        _completed(storage, [1, 2])
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert not result.run_requests  # 2 < every 3

        _completed(storage, [3])
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert [r.run_key for r in result.run_requests] == ["every:3"]
        assert result.run_requests[0].run_config == {"ops": {"take_savepoint": {"config": {"name": "every-3"}}}}
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert not result.run_requests  # never twice for the same reason

        folder = storage.child("requests", "savepoint")
        storage.write_atomic(storage.child("requests", "savepoint", "before upgrade"), b"")
        assert storage.exists(folder)
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert [r.run_key for r in result.run_requests] == ["request:before upgrade"]
        assert result.run_requests[0].run_config["ops"]["take_savepoint"]["config"]["name"] == "request-before-upgrade"
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert not result.run_requests
        # Found from outside (probe 12): a request file written anew was ignored for good, and two files whose
        # names clean up to the same savepoint name gave a run failing on the name taken. Each is a new savepoint.
        request = storage.child("requests", "savepoint", "before upgrade")
        storage.write_atomic(request, b"again")
        os.utime(request.removeprefix("file://"), (1796601600, 1796601600))  # 2026-12-07 00:00:00 UTC
        storage.write_atomic(storage.child("requests", "savepoint", "before-upgrade"), b"")
        result, cursor = _tick(sensor, instance, cursor, resources)
        names = sorted(r.run_config["ops"]["take_savepoint"]["config"]["name"] for r in result.run_requests)
        assert names[0] == "request-before-upgrade-20261207T000000Z", names
        assert names[1].startswith("request-before-upgrade-") and len(set(names) | {"request-before-upgrade"}) == 3
        assert "request:before upgrade@20261207T000000Z" in [r.run_key for r in result.run_requests]
        result, cursor = _tick(sensor, instance, cursor, resources)
        assert not result.run_requests

        state = json.loads(cursor)
        state["code_version"] = "an-older-version"
        result, cursor = _tick(sensor, instance, json.dumps(state), resources)
        version = code_version(build_pipeline(load_settings(config)))
        assert [r.run_key for r in result.run_requests] == [f"code:{version}"]
        result, _ = _tick(sensor, instance, cursor, resources)
        assert not result.run_requests


def test_the_spark_resource_carries_every_spark_setting_and_back():
    from epochal.config import SparkSettings
    from epochal.orchestration.resources import SparkResource

    assert set(SparkResource.model_fields) == set(SparkSettings.model_fields)
    settings = SparkSettings(master="local[2]", parallelism=3, codegen_min_mb=0.5, conf={"spark.sql.ansi.enabled": "true"})
    assert SparkResource.from_settings(settings).settings() == settings
    assert SparkResource().settings() == SparkSettings()  # the same defaults
