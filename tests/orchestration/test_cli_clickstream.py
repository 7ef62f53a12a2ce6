"""The clickstream example from outside: the ``epochal`` command line, a kill -9, and the reference.

Each ``epochal`` call is its own process (its own JVM), as a user's would be.
The sinks are read with the test's Spark session and compared with the
pure-Python reference computed from the same landing files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from tests.support.clickstream_check import check_sinks
from tests.support.reliability_checks import Diff, frame_diff
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
PARTITIONS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]
EPOCHAL = str(Path(sys.executable).with_name("epochal"))


#: A Java that cannot start: a command run with it proves it started no JVM (no SparkSession).
NO_JVM = {"JAVA_HOME": "/nonexistent-java", "PATH": "/nonexistent-java/bin:" + os.environ.get("PATH", "")}


def _epochal(config: Path, *args: str, crash_at: str | None = None, env: dict[str, str] | None = None,
             as_json: bool = True) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "EPOCHAL_CRASH_AT"}, **(env or {})}
    if crash_at:
        env["EPOCHAL_CRASH_AT"] = crash_at
    command = [EPOCHAL, *args, "--config", str(config), *(["--json"] if as_json else [])]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)


def _ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clickstream")
    generate(str(root / "landing"), START, len(PARTITIONS), GeneratorConfig(users=8, events_per_hour=40, seed=3))
    _add_line_separators(root / "landing")
    config = {
        "landing": str(root / "landing"),
        "warehouse": str(root / "warehouse"),
        "checkpoints": {"dir": str(root / "checkpoints"), "retain": 2, "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2},
    }
    path = root / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _add_line_separators(landing: Path) -> None:
    """A user id and a bad line holding U+2028, U+2029 and U+0085, which JSON leaves unescaped: they reach the
    sinks' Delta statistics (the quarantine's raw text sorts last, the user first), and a log reader splitting
    lines on them failed every later epoch of the deployment."""
    first = sorted((landing / "dt=2026-11-01" / "hour=00").glob("*.jsonl"))[0]
    event = {"event_id": "sep-1", "user_id": "ann\u2028\u2029\u0085", "event_type": "purchase", "amount": 2.5,
             "event_time": "2026-11-01T00:30:00+00:00"}
    with first.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(event, ensure_ascii=False) + "\n" + "}\u2028 not json\n")


def _check_sinks(spark, config: Path) -> None:
    check_sinks(spark, config, PARTITIONS)


@pytest.mark.slow
@pytest.mark.timeout(2700)  # eight epochal processes, each its own JVM: minutes on 2 cores, more when shared
def test_cli_run_kill_rerun_equals_reference_then_savepoint_and_restore(spark, deployment):
    # killed in the middle of epoch 1, after its state writes and before its ack
    killed = _epochal(deployment, "run", "--to", PARTITIONS[-1], crash_at="after_state_write:1")
    assert killed.returncode == -9, killed.stderr[-2000:]
    # run again: restores the checkpoint of epoch 0 and replays; the sinks equal the reference
    report = _ok(_epochal(deployment, "run", "--to", PARTITIONS[-1]))
    assert report["restored"]["epoch"] == 0
    assert [e["epoch"] for e in report["epochs"]] == [1, 2]
    assert report["jit"] == "quick"  # two small epochs: the driver ran C1 alone (spark.jit: auto)
    _check_sinks(spark, deployment)

    listed = _ok(_epochal(deployment, "checkpoints", "list", env=NO_JVM))["checkpoints"]  # no JVM needed, none started
    assert [c["epoch"] for c in listed if c["kind"] == "checkpoint"] == [1, 2]  # retain 2
    inspected = _ok(_epochal(deployment, "checkpoints", "inspect", str(listed[-1]["id"]), env=NO_JVM))
    assert {h["stage"] for h in inspected["handles"]} >= {"dedupe", "sessionize"}
    assert inspected["partition"] == PARTITIONS[2] and inspected["metadata_path"] == listed[-1]["metadata_path"]
    _check_text_views(deployment, listed, inspected)
    broken = subprocess.run([sys.executable, "-c", "from pyspark.sql import SparkSession; SparkSession.builder.getOrCreate()"],
                            env={**os.environ, **NO_JVM}, capture_output=True, text=True, timeout=120)
    assert broken.returncode != 0, "the no-JVM environment really stops Spark"

    # a savepoint of small state is copied by delta-rs: no JVM either; the copies are plain Delta tables
    savepoint = _ok(_epochal(deployment, "savepoint", "--name", "before-restore", env=NO_JVM))
    assert savepoint["epoch"] == 2 and Path(savepoint["path"].replace("file://", "")).exists()
    _check_savepoint_copies(spark, Path(savepoint["path"].replace("file://", "")), inspected["handles"])

    # rewind to the older checkpoint (state and sinks by commits written from their Delta logs: no JVM), run on:
    # the same sinks; chk-<id> names the checkpoint, as its folder does (it was once looked up as a savepoint)
    restored = _ok(_epochal(deployment, "restore", "--checkpoint", f"chk-{listed[0]['id']}", env=NO_JVM))
    assert restored["epoch"] == 1 and restored["sinks_by_content"] == []
    _ok(_epochal(deployment, "run", "--to", PARTITIONS[-1]))
    _check_sinks(spark, deployment)
    idle = _ok(_epochal(deployment, "run", "--to", PARTITIONS[-1], env=NO_JVM))  # nothing to run: no JVM started
    assert idle["epochs"] == [] and idle["jit"] is None
    # a backfill from before the oldest retained checkpoint: refused before any JVM, naming where one can start
    early = _epochal(deployment, "run", "--from", PARTITIONS[1], "--to", PARTITIONS[1], env=NO_JVM)
    assert early.returncode == 1, early.stderr[-2000:]
    assert f"no checkpoint or savepoint before partition {PARTITIONS[1]} is retained" in early.stderr
    assert f"backfill from {PARTITIONS[2]} (after checkpoint" in early.stderr

    # state read: delta-rs reads the table in the command's process (no JVM); its rows are the ones Spark reads
    for stage, state in (("dedupe", "seen"), ("sessionize", "open_sessions")):
        rows = _ok(_epochal(deployment, "state", "read", stage, state, env=NO_JVM))["rows"]
        assert rows and {"key_group", "key", "namespace", "value"} <= set(rows[0])
        table = next(h["table_path"] for h in inspected["handles"] if (h["stage"], h["state"]) == (stage, state))
        assert _as_printed(rows) == _as_printed(r.asDict(recursive=True) for r in spark.read.format("delta").load(table).collect())
    assert len(_ok(_epochal(deployment, "state", "read", "dedupe", "seen", "--limit", "5", env=NO_JVM))["rows"]) == 5
    typo = _epochal(deployment, "state", "read", "dedupe", "seenx", env=NO_JVM)  # says what the stage declares
    assert typo.returncode == 1 and "no state dedupe/seenx at " in typo.stderr and "stage 'dedupe' declares: seen" in typo.stderr
    at = _ok(_epochal(deployment, "state", "read", "dedupe", "seen", "--checkpoint", str(listed[0]["id"]), env=NO_JVM))
    seen = next(h for h in _ok(_epochal(deployment, "checkpoints", "inspect", str(listed[0]["id"]), env=NO_JVM))["handles"]
                if (h["stage"], h["state"]) == ("dedupe", "seen"))
    pinned = spark.read.format("delta").option("versionAsOf", seen["version"]).load(seen["table_path"]).collect()
    assert _as_printed(at["rows"]) == _as_printed(r.asDict(recursive=True) for r in pinned)
    _list_a_lost_store_and_a_missing_folder(deployment)
    _restore_past_a_broken_checkpoint(deployment)


def _restore_past_a_broken_checkpoint(config: Path) -> None:
    """``epochal restore`` of the latest checkpoint when its metadata is truncated: it restores the one before and
    says which it skipped in one WARNING line (Python's own copy of the warning added a line of epochal's source)."""
    newest, older = reversed([c for c in _ok(_epochal(config, "checkpoints", "list", env=NO_JVM))["checkpoints"]
                              if c["kind"] == "checkpoint"][-2:])
    Path(newest["metadata_path"].replace("file://", "")).write_text('{"checkpoint_id": ')
    result = _epochal(config, "restore", env=NO_JVM)
    assert _ok(result)["epoch"] == older["epoch"], result.stdout
    mentions = [line for line in result.stderr.splitlines() if f"skipping checkpoint {newest['id']} " in line.lower()]
    assert len(mentions) == 1 and mentions[0].startswith("WARNING "), result.stderr
    assert ".py:" not in result.stderr and "Warning:" not in result.stderr, result.stderr


def _list_a_lost_store_and_a_missing_folder(config: Path) -> None:
    """``checkpoints list`` without a JVM where the completed-checkpoint store lists nothing: a copy of the
    checkpoints whose store was lost lists the savepoint left (registered again, by delta-rs); a folder that
    does not exist (a fresh deployment, a typo) lists nothing."""
    import shutil

    settings = yaml.safe_load(config.read_text())
    copy = config.parent / "lost-store"
    shutil.copytree(settings["checkpoints"]["dir"], copy / "checkpoints")
    shutil.rmtree(copy / "checkpoints" / "_completed")
    for folder, names in ((copy / "checkpoints", ["before-restore"]), (copy / "not-there", [])):
        other = copy / f"{folder.name}.yaml"
        other.write_text(yaml.safe_dump({**settings, "checkpoints": {**settings["checkpoints"], "dir": str(folder)}}))
        listed = _ok(_epochal(other, "checkpoints", "list", env=NO_JVM))["checkpoints"]
        assert [c.get("name") for c in listed] == names, listed


def _check_text_views(config: Path, listed: list[dict], inspected: dict) -> None:
    """Without --json the same answers come as tables a person reads: a line per checkpoint with its id, epoch,
    partition and metadata path; a line per state handle with its stage, state, version and table."""
    table = _epochal(config, "checkpoints", "list", env=NO_JVM, as_json=False)
    assert table.returncode == 0, table.stderr[-2000:]
    header, rule, *lines = table.stdout.splitlines()
    assert header.split()[:5] == ["id", "kind", "status", "epoch", "partition"] and set(rule) <= {"-", " "}
    assert [line.split()[:5] for line in lines] == [
        [str(c["id"]), c["kind"], c["status"], str(c["epoch"]), c["partition"]] for c in listed]
    assert [line.split()[-1] for line in lines] == [c["metadata_path"] for c in listed]
    text = _epochal(config, "checkpoints", "inspect", str(inspected["id"]), env=NO_JVM, as_json=False)
    assert text.returncode == 0, text.stderr[-2000:]
    assert text.stdout.startswith(f"checkpoint {inspected['id']} ({inspected['status']}): epoch {inspected['epoch']}")
    for h in inspected["handles"]:
        assert any(line.split()[:2] == [h["stage"], h["state"]] and str(h["version"]) in line.split()
                   and line.endswith(h["table_path"]) for line in text.stdout.splitlines()), h


def _as_printed(rows) -> list[str]:
    """Rows as ``--json`` prints them, sorted: comparable whichever engine read them."""
    return sorted(json.dumps(row, default=str, sort_keys=True) for row in rows)


def _check_savepoint_copies(spark, folder: Path, handles: list[dict]) -> None:
    """Each state's copy holds the rows of the working table at the savepoint's version, with its schema,
    in a table any Delta reader opens (no deletion vectors), delta-rs included."""
    from deltalake import DeltaTable

    for handle in handles:
        copy = folder / "state" / handle["stage"] / handle["state"]
        assert DeltaTable(str(copy)).protocol().min_reader_version == 1
        original = spark.read.format("delta").option("versionAsOf", handle["version"]).load(handle["table_path"])
        copied = spark.read.format("delta").load(str(copy))
        assert copied.schema == original.schema, handle["state"]
        assert frame_diff(copied, original) == Diff(lost=0, extra=0), handle["state"]
        assert copied.count() == handle["rows"], handle["state"]


def test_cli_errors_are_one_line_and_fail_before_work(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("checkpoints:\n  retian: 3\n")
    result = subprocess.run([EPOCHAL, "run", "--config", str(bad)], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "checkpoints.retian" in result.stderr and "did you mean 'checkpoints.retain'" in result.stderr
    assert len([l for l in result.stderr.splitlines() if l.startswith("epochal: error")]) == 1
    assert result.stdout == ""
    # with --json, stdout is one JSON document whatever happens: a failure says so there too
    result = subprocess.run([EPOCHAL, "run", "--config", str(bad), "--json"], capture_output=True, text=True, timeout=120)
    failure = json.loads(result.stdout)
    assert result.returncode == 1 and failure["ok"] is False and "checkpoints.retian" in failure["error"], failure
    # a pipeline's own option is located like any other key: its file and line (it named no line)
    bad.write_text("pipeline: clickstream\noptions:\n  session_gap: 45m\n  allowed_lateness: soon\n")
    result = subprocess.run([EPOCHAL, "run", "--config", str(bad)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **NO_JVM})  # refused before any work: no JVM needed
    assert result.returncode != 0 and result.stdout == "", result
    assert result.stderr.startswith(f"epochal: error: config error in {bad}, line 4: options.allowed_lateness = 'soon'")


@pytest.mark.parametrize(("args", "reason", "command"), [
    (["restore", "--parallelism", "abc"], "argument --parallelism: invalid int value: 'abc'", "epochal restore"),
    (["state", "read", "dedupe", "seen", "--limit", "0"], "argument --limit: must be >= 1, not 0",
     "epochal state read"),
    (["run", "--bogus"], "unrecognized arguments: --bogus", "epochal run"),
    (["checkpoints", "inspect"], "the following arguments are required: id", "epochal checkpoints inspect"),
    (["savepoint", "--name", "../x"], "argument --name: Invalid savepoint name '../x'", "epochal savepoint"),
], ids=["type", "range", "unknown-option", "missing-argument", "savepoint-name"])
def test_cli_usage_errors_fail_like_any_other_failure(args, reason, command):
    """argparse's own errors printed a usage block on stderr and nothing on stdout, even with --json."""
    result = subprocess.run([EPOCHAL, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == "", result
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"epochal: error: {reason}") and f"(see {command} --help)" in result.stderr
    result = subprocess.run([EPOCHAL, *args, "--json"], capture_output=True, text=True, timeout=120)
    failure = json.loads(result.stdout)
    assert result.returncode == 2 and failure["ok"] is False and failure["error_type"] == "UsageError", failure
    assert failure["error"].startswith(reason) and len(result.stderr.splitlines()) == 1, result.stderr
