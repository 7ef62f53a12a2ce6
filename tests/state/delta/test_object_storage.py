"""Checkpoints and Delta tables on an S3-compatible object store (moto's server on loopback).

fsspec (s3fs) reads and writes ``s3://`` URLs; Spark and Delta read the same
objects as ``s3a://`` (Hadoop's S3A connector, resolved by Spark like the
Delta jars). Credentials come from the environment only, and distinctive
values are looked for in every object written and everything printed.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import pytest

from epochal.config import SparkSettings
from epochal.state.checkpoint.ids import FileIdCounter
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.delta.paths import to_spark, to_url
from epochal.state.delta.objectstore import HADOOP_VERSION, S3A_PACKAGES, delta_rs_options, spark_packages
from epochal.state.session import spark_conf

SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAEPOCHALQ7TESTKEY",
    "AWS_SECRET_ACCESS_KEY": "epochal+Secret/Zq8vX2+never-print-me",
    "AWS_SESSION_TOKEN": "epochal-Token-Wm4kP9-never-print-me",
}


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> dict[str, str]:
    """This process's environment pointed at the loopback S3 server, with distinctive credentials."""
    env = {**SECRETS, "AWS_ENDPOINT_URL": s3_server, "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def _bucket(name: str) -> str:
    fs = fsspec.filesystem("s3")
    if not fs.exists(name):
        fs.mkdir(name)
    return name


def test_s3_and_s3a_spellings_map_both_ways():
    assert to_spark("s3://bucket/chk/shared/a/b") == "s3a://bucket/chk/shared/a/b"
    assert to_url("s3a://bucket/chk/shared/a/b/") == "s3://bucket/chk/shared/a/b"
    assert to_spark(to_url("s3a://bucket/w/user_totals")) == "s3a://bucket/w/user_totals"
    assert to_url(to_spark("s3://bucket/w/user_totals")) == "s3://bucket/w/user_totals"


def test_delta_rs_options_name_the_endpoint_and_region_never_a_credential():
    env = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000", "AWS_ENDPOINT_URL": "http://elsewhere",
           "AWS_DEFAULT_REGION": "eu-west-1", **SECRETS}
    assert delta_rs_options("s3://bucket/chk/_completed", env) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "eu-west-1"}
    assert delta_rs_options("s3://bucket/k", {"AWS_ENDPOINT_URL": "https://s3.example"}) == {"AWS_ENDPOINT_URL": "https://s3.example"}
    assert delta_rs_options("/data/chk/_completed", env) == {} == delta_rs_options("file:///data/chk", env)


def test_completed_store_on_s3_commits_with_delta_rs_and_never_replaces_a_commit(s3_env):
    """Two writers of the store from the same version: the second's commit must not replace the first's
    (delta-rs's conditional PUT on the loopback server); it lands after it or is refused."""
    import os

    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    from epochal.state.checkpoint.store import DeltaCompletedCheckpointStore
    from tests.state.checkpoint.test_checkpoint_store import completed

    url = f"s3://{_bucket('chk-store')}/checkpoints/_completed"
    first, second = (DeltaCompletedCheckpointStore(None, url, max_retained=5) for _ in range(2))
    first.add(completed(1))
    assert second.known_ids() == [1]
    first.add(completed(2))  # version 2
    try:
        second._merge(1, inserted=[completed(3)], updated=[])  # planned on version 1, as a slow writer would
    except DeltaError:
        pass  # refused as a conflict: as good as landing after the first writer's commit
    ids = DeltaCompletedCheckpointStore(None, url, max_retained=5).known_ids()
    assert {1, 2} <= set(ids), f"a commit was replaced: {ids}"
    history = DeltaTable(url, storage_options=delta_rs_options(url, os.environ)).history()
    assert {h["engineInfo"].split(":")[0] for h in history} == {"delta-rs"}


def test_s3_locations_bring_the_s3a_connector_that_matches_pyspark_hadoop():
    import pyspark

    bundled = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert bundled == [f"hadoop-client-api-{HADOOP_VERSION}.jar"]
    assert spark_packages(["/data/landing", "s3://b/warehouse"]) == list(S3A_PACKAGES)
    assert spark_packages(["/data/landing", "file:///tmp/w"]) == []

    environ = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", **SECRETS}
    conf = spark_conf(SparkSettings(master="local[1]"), locations=["s3a://b/w"], environ=environ)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert not [k for k, v in conf.items() if any(secret in v for secret in SECRETS.values())]
    # a user's own spark.conf wins over what is derived from the environment
    own = SparkSettings(master="local[1]", conf={"spark.hadoop.fs.s3a.path.style.access": "false"})
    assert spark_conf(own, locations=["s3://b/w"], environ=environ)["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert "spark.hadoop.fs.s3a.endpoint" not in spark_conf(SparkSettings(master="local[1]"), environ=environ)


def test_config_errors_never_echo_a_secret(tmp_path):
    from epochal.config import ConfigError, load_settings

    secret = SECRETS["AWS_SECRET_ACCESS_KEY"]
    path = tmp_path / "epochal.yaml"
    path.write_text(f"spark:\n  conf:\n    spark.hadoop.fs.s3a.secret.key: ['{secret}']\n    spark.ui.port: [4040]\n")
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    assert "spark.conf.spark.hadoop.fs.s3a.secret.key" in str(error.value) and "[4040]" in str(error.value)
    assert secret not in str(error.value) and "redacted" in str(error.value)


def test_checkpoint_storage_on_s3(s3_env):
    base = f"s3://{_bucket('chk-storage')}/deployment/checkpoints"
    storage = CheckpointStorage(base)
    assert storage.base_url == base
    storage.write_atomic(storage.metadata_path(1), b"one")
    storage.write_atomic(storage.metadata_path(1), b"one, rewritten")
    storage.write_atomic(storage.metadata_path(12), b"twelve")
    assert storage.read(storage.metadata_path(1)) == b"one, rewritten"
    assert [cid for cid, _ in storage.list_checkpoint_dirs()] == [1, 12]
    assert storage.list_names(storage.child("nothing-here")) == []
    assert storage.create_exclusive(storage.child("claims", "a"), b"first") is True
    assert storage.create_exclusive(storage.child("claims", "a"), b"second") is False
    assert storage.read(storage.child("claims", "a")) == b"first"
    storage.delete_tree(storage.checkpoint_dir(1))
    assert [cid for cid, _ in storage.list_checkpoint_dirs()] == [12]
    assert storage.resolve_pointer(f"{base}/chk-12").checkpoint_id == 12
    shared = "s3a://chk-storage/deployment/checkpoints/shared/dedupe/seen"
    assert to_spark(storage.shared_dir("dedupe", "seen")) == shared


def test_id_counter_on_s3_never_hands_out_an_id_twice(s3_env):
    """Two counters (as two processes would) claim ids at once: If-None-Match makes each claim exclusive."""
    url = f"s3://{_bucket('chk-ids')}/checkpoints/ids"
    counters = [FileIdCounter(url), FileIdCounter(url)]
    claimed: list[int] = []
    lock = threading.Lock()

    def claim(counter: FileIdCounter) -> None:
        for _ in range(6):
            got = int(counter.next_id())
            with lock:
                claimed.append(got)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(claim, counters * 2))
    assert sorted(claimed) == list(range(1, 25))
    assert int(FileIdCounter(url).next_id()) == 25


# ---------------------------------------------------------------------------- end to end

E2E_PARTITIONS = ["2026-11-01-00:00", "2026-11-01-01:00"]


def test_a_missing_bucket_is_refused_before_any_write_and_never_created(s3_env, tmp_path):
    """s3fs makes a missing bucket when asked for a folder in it: a misspelt bucket would quietly become a new one
    (probe 13). check_buckets refuses it, naming the key, the location and the bucket, and the CLI's run does so
    before its first write (the lease), with no JVM, for the checkpoints and for the warehouse."""
    from tests.support.clickstream_e2e import SMALL, START, epochal, write_config
    from epochal.pipeline.examples.clickstream.generator import generate
    from epochal.state.delta.objectstore import check_buckets
    from epochal.state.errors import LocationError

    fs = fsspec.filesystem("s3")
    root = f"s3://{_bucket('epochal-buckets')}/deployment"
    check_buckets({"warehouse": f"{root}/warehouse", "checkpoints.dir": str(tmp_path), "landing": None})
    with pytest.raises(LocationError, match=r"warehouse: s3a://no-such-warehouse/w: the bucket 'no-such-warehouse' "
                                            r"does not exist \(epochal creates no buckets\)") as refused:
        check_buckets({"checkpoints.dir": f"{root}/checkpoints", "warehouse": "s3a://no-such-warehouse/w"})
    assert refused.value.key == "warehouse" and "fix `warehouse:` in the configuration" in str(refused.value)

    generate(f"{root}/landing", START, 1, SMALL)
    no_java = {**s3_env, "JAVA_HOME": "/nonexistent-java", "PATH": "/nonexistent-java/bin:" + os.environ.get("PATH", "")}
    for key, checkpoints, warehouse, bucket in (
        ("checkpoints.dir", "s3://no-such-checkpoints/chk", f"{root}/warehouse", "no-such-checkpoints"),
        ("warehouse", f"{root}/checkpoints", "s3a://no-such-warehouse/w", "no-such-warehouse"),
    ):
        config = write_config(tmp_path / f"{bucket}.yaml", landing=f"{root}/landing", warehouse=warehouse,
                              checkpoints=checkpoints, spark={"master": "local[1]"})
        refused = epochal(config, "run", "--to", "2026-11-01-00:00", env=no_java)
        assert refused.returncode != 0 and f"{key}: " in refused.stderr, refused.stderr[-2000:]
        assert f"the bucket '{bucket}' does not exist" in refused.stderr, refused.stderr[-2000:]
        fs.invalidate_cache()
        assert not fs.exists(bucket), f"{bucket} was created"
    assert not fs.exists(f"{root}/checkpoints") and not fs.exists(f"{root}/warehouse"), "nothing written"

    down = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in down.items():
            patch.setenv(name, value)
        with pytest.raises(LocationError, match=r"checkpoints.dir: s3://elsewhere/chk: the bucket 'elsewhere' cannot be "
                                                r"read: .*127\.0\.0\.1:9"):
            check_buckets({"checkpoints.dir": "s3://elsewhere/chk"}, {"skip_instance_cache": True})


def _objects(bucket: str) -> dict[str, bytes]:
    fs = fsspec.filesystem("s3")
    return {path: fs.cat_file(path) for path in fs.find(bucket)}


def _leaks(texts: dict[str, bytes]) -> list[str]:
    needles = [value.encode() for value in SECRETS.values()]
    return sorted(name for name, data in texts.items() if any(n in data for n in needles))


def _check_copies_on_s3(savepoint: dict, inspected: dict, env: dict[str, str]) -> None:
    """Every state copy of the savepoint opens with delta-rs on S3, as a plain table with the recorded rows."""
    from deltalake import DeltaTable

    from epochal.state.delta.objectstore import delta_rs_options

    assert savepoint["path"].startswith("s3://") and inspected["handles"]
    for handle in inspected["handles"]:
        url = f"{savepoint['path']}/{handle['table_path']}"
        table = DeltaTable(url, storage_options=delta_rs_options(url, env))
        assert table.protocol().min_reader_version == 1, url
        assert table.to_pyarrow_table().num_rows == handle["rows"], url


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_clickstream_on_s3_kill_rerun_equals_reference_and_no_secret_leaks(spark, s3_env, tmp_path):
    from tests.support.clickstream_e2e import SINKS, SMALL, START, check_sinks, epochal, ok, write_config
    from epochal.pipeline.examples.clickstream.generator import generate
    from tests.support.reliability_doc import markdown_table, write_section

    started = time.monotonic()
    bucket = _bucket("epochal-e2e")
    root = f"s3://{bucket}/deployment"
    generate(f"{root}/landing", START, len(E2E_PARTITIONS), SMALL)
    config = write_config(
        tmp_path / "epochal.yaml", landing=f"{root}/landing", warehouse=f"{root}/warehouse",
        checkpoints=f"{root}/checkpoints", retain=1,  # the rerun's checkpoint subsumes epoch 0's: retention on S3
        spark={"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "driver_memory": "1g"},
    )
    outputs: dict[str, bytes] = {}

    killed = epochal(config, "run", "--to", E2E_PARTITIONS[-1], env=s3_env, crash_at="after_state_write:1")
    assert killed.returncode == -9, killed.stderr[-2000:]
    rerun = epochal(config, "run", "--to", E2E_PARTITIONS[-1], env={**s3_env, "EPOCHAL_SPARK_LOG_LEVEL": "WARN"})
    report = ok(rerun)
    assert report["restored"]["epoch"] == 0 and [e["epoch"] for e in report["epochs"]] == [1]
    # INFO: the most talkative log a user would keep (S3A and Delta set-up included)
    listed = epochal(config, "checkpoints", "list", env={**s3_env, "EPOCHAL_SPARK_LOG_LEVEL": "INFO"})
    assert [c["epoch"] for c in ok(listed)["checkpoints"]] == [1]
    assert not fsspec.filesystem("s3").exists(f"{bucket}/deployment/checkpoints/chk-1"), "retention removed chk-1"
    # a savepoint of this small state on S3: copied by delta-rs, with no JVM (no Java at all in its environment)
    no_java = {**s3_env, "JAVA_HOME": "/nonexistent-java", "PATH": "/nonexistent-java/bin:" + os.environ.get("PATH", "")}
    saved = epochal(config, "savepoint", "--name", "on-s3", env=no_java)
    _check_copies_on_s3(ok(saved), ok(epochal(config, "checkpoints", "inspect", str(ok(saved)["id"]), env=no_java)), s3_env)
    for name, result in (("killed run", killed), ("rerun", rerun), ("checkpoints list", listed), ("savepoint", saved)):
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = result.stdout.encode(), result.stderr.encode()

    objects = _objects(bucket)
    local = tmp_path / "warehouse-copy"
    fsspec.filesystem("s3").get(f"{bucket}/deployment/warehouse/", str(local), recursive=True)
    rows = check_sinks(spark, f"{root}/landing", local, E2E_PARTITIONS)

    local_files = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    leaks = _leaks(objects) + _leaks(outputs) + _leaks(local_files)
    assert leaks == [], f"credentials found in {leaks}"
    # the logs were there to be searched: every command's JSON report, and Spark's own log from the JVM runs
    assert all(outputs[f"{name} stdout"].strip() for name in ("rerun", "checkpoints list", "savepoint"))
    assert all(b"log4j" in outputs[f"{name} stderr"] for name in ("killed run", "rerun"))

    prefixes = ("landing", "checkpoints", "warehouse")
    counts = {p: len([k for k in objects if k.startswith(f"{bucket}/deployment/{p}/")]) for p in prefixes}
    assert counts["checkpoints"] and counts["warehouse"] and set(rows) == set(SINKS)
    write_section("distributed-s3", "Beyond one machine: object storage", "\n\n".join([
        "moto's S3-compatible server on 127.0.0.1; landing, checkpoints (fsspec `s3://`) and Delta tables "
        "(Spark `s3a://`, hadoop-aws " + HADOOP_VERSION + ") all in one bucket; local Spark master. "
        "Credentials only in the environment (distinctive values).",
        markdown_table(["figure", "value"], [
            ["`epochal` runs", "killed (SIGKILL after a state write of epoch 1), rerun (restored epoch 0, replayed), "
                               "`checkpoints list`: all as expected"],
            ["sinks equal to the reference", f"{len(rows)} of 5 ({sum(rows.values())} rows)"],
            *[[f"objects under {p}/", counts[p]] for p in prefixes],
            ["objects and outputs searched for the credentials", f"{len(objects)} objects, {len(outputs)} outputs"],
            ["credentials found", len(leaks)],
            ["wall time (s)", f"{time.monotonic() - started:.0f}"],
        ]),
    ]), test=__file__)
