"""A replay reads the input its epoch first read, or stops naming the file that changed (issue 19)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import fsspec
import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal import Pipeline
from epochal.config import load_settings
from epochal.pipeline.errors import InputChangedError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.pipeline.sources import (SourceBatch, batch_from_position, check_unchanged, fingerprint, planned_bytes,
                                      record_fingerprints)

pytestmark = pytest.mark.timeout(900)


def test_a_recorded_plan_names_each_file_with_its_size_and_modification_time(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"key": "a", "n": 1}\n')
    recorded = record_fingerprints(SourceBatch("landing", "p", (str(path),), {"partition": "p", "files": [str(path)]}))
    assert recorded["fingerprints"] == {str(path): {"size": path.stat().st_size, "mtime": path.stat().st_mtime}}
    check_unchanged("landing", json.loads(json.dumps(recorded)), epoch=3, partition="p")  # a JSON round trip keeps it equal

    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))  # same bytes, touched
    with pytest.raises(InputChangedError, match=r"epoch 3 \(partition p\).*a\.jsonl changed"):
        check_unchanged("landing", recorded, epoch=3, partition="p")
    path.unlink()
    with pytest.raises(InputChangedError, match=r"a\.jsonl is gone") as caught:
        check_unchanged("landing", recorded, epoch=3, partition="p")
    assert caught.value.path == str(path) and "`epochal run --from p --to ...`" in caught.value.action
    check_unchanged("landing", {"partition": "p", "files": [str(path)]}, epoch=3, partition="p")  # no fingerprints


def test_a_plan_is_rebuilt_with_its_partition_and_files_whatever_the_sources_position_holds(tmp_path):
    """A user's own source keeps what it likes in its position (found by a probe, 2026-12-06: a replay of a
    source whose position held neither ``partition`` nor ``files`` failed, or would have read nothing)."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"key": "a", "n": 1}\n')
    batch = SourceBatch("orders", "2026-11-04", (str(path),), {"day": "2026-11-04", "cursor": 17})
    recorded = json.loads(json.dumps(record_fingerprints(batch)))
    assert batch_from_position("orders", recorded) == batch, "partition, files and the source's own position"
    assert planned_bytes(recorded) == path.stat().st_size
    old = {"partition": "p", "files": [str(path)]}  # a plan recorded before 2026-12-06: the hourly source's position
    assert batch_from_position("landing", old) == SourceBatch("landing", "p", (str(path),), old)
    # ... and a user's source's position without them (a probe found it replayed with no input): its fingerprinted
    # files, sorted as the JSON kept them, and the epoch's key
    other = tmp_path / "0.jsonl"
    other.write_text("")
    fingerprinted = {"day": "d", "fingerprints": {str(path): fingerprint(str(path)), str(other): fingerprint(str(other))}}
    assert batch_from_position("orders", json.loads(json.dumps(fingerprinted, sort_keys=True)), "2026-11-04") == SourceBatch(
        "orders", "2026-11-04", (str(other), str(path)), {"day": "d"})


def test_an_object_store_file_is_named_by_its_etag(s3_server, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("replay-input")
    url = "s3://replay-input/dt=2026-11-01/hour=00/part-0.jsonl"
    fs.pipe(url, b'{"key": "a", "n": 1}\n')
    fsspec.filesystem("s3").invalidate_cache()
    first = fingerprint(url)
    assert first["size"] == 21 and first["etag"]
    fs.pipe(url, b'{"key": "a", "n": 2}\n')  # same size, other content
    fsspec.filesystem("s3").invalidate_cache()
    assert fingerprint(url)["etag"] != first["etag"]


def _runner(spark, tmp_path) -> EpochRunner:
    config = {
        "pipeline": "toy", "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints"), "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return EpochRunner(build_deployment(load_settings(path), spark))


def test_a_replay_whose_input_changed_stops_and_a_backfill_replans(spark, tmp_path, toy_registered):
    landing = tmp_path / "landing"
    toy.write_hour(landing, 0, [("a", 1)])
    toy.write_hour(landing, 1, [("a", 10), ("b", 2)])
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-01:00")
    first = runner.d.coordinator.store.latest()

    runner.restore(first.checkpoint_id - 1)  # back to epoch 0: epoch 1 is replayed from its recorded plan
    toy.write_hour(landing, 1, [("a", 10), ("b", 2), ("c", 99)])  # the landed file was rewritten since
    with pytest.raises(InputChangedError, match=r"hour=01/part-0000\.jsonl changed") as caught:
        runner.run(to="2026-11-01-01:00")
    assert caught.value.epoch == 1
    totals = {r.key: r.total for r in runner.d.sinks["totals"].read().collect()}
    assert totals == {"a": 1}, "nothing of the changed input was read"

    runner.run(from_="2026-11-01-01:00", to="2026-11-01-01:00")  # a backfill re-plans on purpose
    assert {r.key: r.total for r in runner.d.sinks["totals"].read().collect()} == {"a": 11, "b": 2, "c": 99}


def test_a_planned_file_that_cannot_be_found_fails_before_its_plan_is_recorded_and_the_next_run_plans_anew(
        spark, tmp_path, toy_registered):
    """A dangling link in an hour folder was planned with no fingerprint: the epoch failed reading it
    (PATH_NOT_FOUND), and once the link was removed every rerun replayed the recorded plan and failed the same way.
    Now the plan is refused naming the file, before it is recorded; the next run plans the folder as it is then."""
    from epochal.pipeline.errors import UnreadFilesError

    landing = tmp_path / "landing"
    toy.write_hour(landing, 0, [("a", 1)])
    link = landing / "dt=2026-11-01" / "hour=00" / "part-0001.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")
    runner = _runner(spark, tmp_path)
    with pytest.raises(UnreadFilesError, match=r"1 file\(s\) listed for the epoch that cannot be found .*part-0001\.jsonl"):
        runner.run(to="2026-11-01-00:00")
    assert not list((tmp_path / "checkpoints").rglob("*landing*")), "no plan recorded"
    link.unlink()
    runner.run(to="2026-11-01-00:00")
    assert {r.key: r.total for r in runner.d.sinks["totals"].read().collect()} == {"a": 1}
    assert list((tmp_path / "checkpoints").rglob("*landing*")), "the plan recorded where the first run had none"


def test_sinks_keep_delta_defaults_and_a_restore_after_vacuum_rewinds_by_content(spark, tmp_path, toy_registered, caplog):
    landing = tmp_path / "landing"
    for hour, rows in enumerate([[("a", 1)], [("a", 10), ("b", 2)], [("b", 5)]]):
        toy.write_hour(landing, hour, rows)
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-02:00")
    sinks = runner.d.sinks
    properties = spark.sql(f"DESCRIBE DETAIL delta.`{sinks['totals'].path}`").first().properties
    assert not {"delta.logRetentionDuration", "delta.deletedFileRetentionDuration"} & set(properties)

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:  # the user's own VACUUM, as docs/operations.md allows: older sink versions lose their files
        for sink in sinks.values():
            spark.sql(f"VACUUM delta.`{sink.path}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    first = min(e.checkpoint_id for e in runner.d.coordinator.store.all())
    with caplog.at_level("WARNING", logger="epochal"):
        restored = runner.restore(first)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sink ")]
    assert len(said) == 1 and said[0].startswith("sink totals: cannot restore ") and said[0].endswith(
        "rewinding it by content instead"), said  # the warning docs/operations.md promises
    # the upsert sink's MERGEs rewrote its files (vacuumed: rewound by content); the append-only log kept them
    assert (restored.sinks_by_content, restored.sinks_by_version) == (("totals",), ("log",))
    assert {r.key: r.total for r in sinks["totals"].read().collect()} == {"a": 1}
    assert sinks["log"].read().count() == 1

    runner.run(to="2026-11-01-02:00")
    assert {r.key: r.total for r in sinks["totals"].read().collect()} == {"a": 11, "b": 7}
    assert sinks["log"].read().count() == 4


class FolderOfTheHour:
    """A user's own source (the ``Source`` protocol): its position is the folder it read, not the files."""

    name = "landing"

    def __init__(self, landing) -> None:
        self.landing = Path(landing)

    def plan(self, info):
        folder = self.landing / f"dt={info.window_start:%Y-%m-%d}" / f"hour={info.window_start:%H}"
        return SourceBatch(self.name, info.partition, tuple(sorted(str(p) for p in folder.glob("*.jsonl"))),
                           {"folder": str(folder)})


def test_a_replay_of_a_users_own_source_reads_its_recorded_files(spark, tmp_path, toy_registered, monkeypatch):
    from epochal.pipeline.registry import PIPELINES

    toy_build = PIPELINES["toy"]

    def build(settings):
        shipped = toy_build(settings)
        return Pipeline("toy", [FolderOfTheHour(settings.landing)], shipped.stages, shipped.sinks, shipped.max_parallelism)

    monkeypatch.setitem(PIPELINES, "toy", build)
    landing = tmp_path / "landing"
    for hour, rows in enumerate([[("a", 1)], [("a", 10), ("b", 2)], [("b", 5)]]):
        toy.write_hour(landing, hour, rows)
    runner = _runner(spark, tmp_path)
    runner.run(to="2026-11-01-01:00")
    # the checkpoint and a savepoint keep the source's own position beside the epoch (``checkpoints inspect``)
    hour1 = {"epoch": 1, "partition": "2026-11-01-01:00", "position": {"folder": str(landing / "dt=2026-11-01" / "hour=01")}}
    assert runner.d.coordinator.store.latest().metadata.source_positions == {"landing": hour1}
    runner.savepoint("hour-1")
    assert runner.d.coordinator.store.latest().metadata.source_positions == {"landing": hour1}
    runner.restore(runner.d.coordinator.store.latest(CheckpointKind.CHECKPOINT).checkpoint_id - 1)  # epoch 1 replayed
    report = runner.run(to="2026-11-01-02:00")
    assert [e.epoch for e in report.epochs] == [1, 2]
    assert {r.key: r.total for r in runner.d.sinks["totals"].read().collect()} == {"a": 11, "b": 7}
    assert runner.d.sinks["log"].read().count() == 4, "the replay read its recorded files, once"

    runner.restore(runner.d.coordinator.store.latest().checkpoint_id - 1)  # epoch 2 is replayed: its file was rewritten
    toy.write_hour(landing, 2, [("b", 5), ("c", 1)])
    with pytest.raises(InputChangedError) as caught:
        runner.run(to="2026-11-01-02:00")
    assert caught.value.partition == "2026-11-01-02:00" and "`epochal run --from 2026-11-01-02:00 --to ...`" in caught.value.action


CHECKED = """
from pyspark.sql import types as T

from epochal import Pipeline, SinkMode, SinkSpec, SourceBatch

ROWS = T.StructType([T.StructField("key", T.StringType())])


class Orders:
    name = "orders"

    def check(self):
        raise FileNotFoundError("/nonexistent/orders")

    def plan(self, info):
        return SourceBatch(self.name, info.partition, (), {})


class Keys:
    name, inputs, outputs, keyed_state, operator_state = "keys", ("orders",), ("rows",), (), ()

    def process(self, ctx, inputs):
        return {"rows": ctx.spark.createDataFrame([], ROWS)}


def build(settings):
    return Pipeline("checked", [Orders()], [Keys()], [SinkSpec("rows", "keys.rows", SinkMode.APPEND, ROWS)])
"""


def test_a_users_own_source_whose_check_raises_is_named_before_spark_starts(tmp_path, monkeypatch):
    """Found by a probe (2026-12-06): a source's own ``check()`` failure was printed bare."""
    import subprocess
    import sys

    from tests.support.user_package import on_import_path

    with on_import_path(tmp_path / "site", "acme", {"checked": CHECKED}, monkeypatch):
        config = {"pipeline": "acme.checked:build", "partitions": {"start": "2026-11-01T00:00:00Z"}}
        (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
        no_jvm = {**os.environ, "JAVA_HOME": "/nonexistent-java"}
        done = subprocess.run([str(Path(sys.executable).with_name("epochal")), "run", "--to", "2026-11-01-00:00",
                               "--config", str(tmp_path / "epochal.yaml")], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env=no_jvm)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "epochal: error: source 'orders': its check() failed: FileNotFoundError: /nonexistent/orders" in done.stderr
