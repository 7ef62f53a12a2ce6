"""Commands refused before any work: no JVM started (no ``java`` on the path), nothing written, not even the
lease's record in a new checkpoint folder (probe 13), and an error naming what is wrong: a landing folder that does
not exist, a partition whose window has not closed, a range backwards or past the state, partitions changed since
the deployment's epochs were numbered. Through the CLI, as a user meets them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

import tests.support.toy_pipeline as toy
from tests.pipeline.test_user_mistakes import FIRST, _config, _runner
from tests.support.paths import child_env

_MAIN = "import sys, tests.support.toy_pipeline as t; t.register(); from epochal.orchestration.cli import main; sys.exit(main(sys.argv[1:]))"


def _cli_without_java(*args: str, **variables: str) -> subprocess.CompletedProcess:
    """``epochal ARGS`` with the toy pipeline registered, no Java to start, and the environment's ``variables``."""
    env = child_env({**os.environ, **variables, "JAVA_HOME": "/nonexistent-java",
                     "PATH": "/nonexistent-java/bin:" + os.environ["PATH"]})
    return subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True, timeout=300, env=env)


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "warehouse").exists()


def test_a_landing_folder_that_does_not_exist_fails_the_run_before_any_epoch_and_without_a_jvm(tmp_path):
    """Through the CLI, as a user meets it: the run names the folder, runs nothing, writes nothing, and starts no
    Java (no ``java`` on the path); once the folder exists, the same command runs the epoch."""
    config = _config(tmp_path, tmp_path / "landing")
    result = _cli_without_java("run", "--to", FIRST, "--config", str(config))
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"source 'landing': the landing folder {tmp_path / 'landing'} does not exist" in result.stderr
    assert "Traceback" not in result.stderr and "java" not in result.stderr.lower()
    _nothing_written(tmp_path)


def test_a_partition_whose_window_has_not_closed_is_refused_before_any_work_and_without_a_jvm(tmp_path):
    """``run --to`` (or ``--partition``) an hour not over yet would read the files landed so far and mark the epoch
    done for good: what lands later in that hour would never be read. Dagster's partitions end at the last closed
    window; the command line refuses the others, naming the window's end and the latest closed partition."""
    from datetime import datetime, timedelta, timezone

    toy.write_hour(tmp_path / "landing", 0, [("a", 1)])
    config = _config(tmp_path, tmp_path / "landing")
    now = datetime.now(timezone.utc)
    open_hour = (now + timedelta(hours=2)).strftime("%Y-%m-%d-%H:00")  # open however long the commands take
    closed = {(now + timedelta(hours=h)).strftime("%Y-%m-%d-%H:00") for h in (-1, 0)}  # the hour may turn meanwhile
    for args in (["--to", open_hour], ["--partition", open_hour], ["--from", FIRST, "--to", open_hour]):
        result = _cli_without_java("run", *args, "--config", str(config))
        assert result.returncode == 1, result.stderr[-2000:]
        assert f"epochal: error: partition '{open_hour}' has not closed yet: its window ends at " in result.stderr
        latest = re.search(r"the latest closed partition is '([^']+)'", result.stderr)
        assert latest and latest.group(1) in closed, result.stderr
        assert "Traceback" not in result.stderr and "java" not in result.stderr.lower()
    _nothing_written(tmp_path)


def test_a_range_backwards_or_past_the_state_is_refused_before_any_work_and_without_a_jvm(tmp_path):
    """``run --from B --to A`` with A before B rewound the state and the sinks to B and ran nothing (exit 0, the
    epochs after A gone); ``--from`` past the state's next epoch started Spark before it was refused."""
    toy.write_hour(tmp_path / "landing", 0, [("a", 1)])
    config = _config(tmp_path, tmp_path / "landing")
    cases = {
        ("--from", "2026-11-01-03:00", "--to", "2026-11-01-01:00"):
            "epochal: error: --to 2026-11-01-01:00 is before --from 2026-11-01-03:00",
        ("--from", "2026-11-01-03:00", "--to", "2026-11-01-05:00"):
            "epochal: error: cannot start at 2026-11-01-03:00: the state is at the beginning; run from 2026-11-01-00:00 first",
    }
    for args, said in cases.items():
        result = _cli_without_java("run", *args, "--config", str(config))
        assert result.returncode == 1, result.stderr[-2000:]
        assert said in result.stderr, result.stderr[-2000:]
        assert "Traceback" not in result.stderr and "java" not in result.stderr.lower()
    _nothing_written(tmp_path)


def test_partitions_changed_since_the_epochs_were_numbered_are_refused_before_any_work(spark, tmp_path, toy_registered):
    """Found from outside (probe 15): ``partitions.start`` moved two hours later, and the next run went on from the
    state's epoch, now two hours later: two hours of input were never read. ``run``, ``restore`` and ``savepoint``
    refuse it, naming what changed and where it is recorded, with no JVM and nothing written; set back, it runs."""
    runner = _runner(spark, tmp_path)
    runner.run(to=FIRST)
    progress = tmp_path / "checkpoints" / "progress.json"
    assert json.loads(progress.read_text())["partitions"] == {"start": "2026-11-01T00:00:00+00:00", "granularity": "hourly"}
    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.glob("**/*") if p.is_file())
    moved = tmp_path / "moved.yaml"
    moved.write_text(yaml.safe_dump({**yaml.safe_load((tmp_path / "epochal.yaml").read_text()),
                                     "partitions": {"start": "2026-11-01T02:00:00Z"}}))
    for command in (["run", "--to", "2026-11-01-03:00"], ["restore"], ["savepoint", "--name", "sp"]):
        result = _cli_without_java(*command, "--config", str(moved))
        assert result.returncode == 1, (command, result.stderr[-2000:])
        assert "partitions changed since this deployment's epochs were numbered" in result.stderr, result.stderr[-2000:]
        assert "start 2026-11-01T00:00:00+00:00 (now 2026-11-01T02:00:00+00:00)" in result.stderr
        assert "set partitions back to start: 2026-11-01T00:00:00+00:00" in result.stderr
        assert "Traceback" not in result.stderr and "java" not in result.stderr.lower()
    moved.unlink()
    after = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.glob("**/*") if p.is_file())
    assert after == before, "nothing written"


def test_a_standalone_master_nobody_answers_at_is_refused_before_any_work_and_without_a_jvm(tmp_path):
    """``spark.master: spark://nohost.invalid:7077`` ended after a minute of Spark's retries in py4j's "An error occurred
    while calling None.org.apache.spark.sql.classic.SparkSession", naming neither the key nor the host, with the lease
    recorded in a new checkpoint folder. Now the run names both, before any JVM and before anything is written."""
    import socket

    toy.write_hour(tmp_path / "landing", 0, [("a", 1)])
    config = _config(tmp_path, tmp_path / "landing")
    with socket.socket() as unused:  # a loopback port nothing listens on once this socket is closed
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    for master in ("spark://nohost.invalid:7077", f"spark://127.0.0.1:{port}"):
        result = _cli_without_java("run", "--to", FIRST, "--config", str(config), EPOCHAL__SPARK__MASTER=master)
        assert result.returncode == 1, result.stderr[-2000:]
        assert f"epochal: error: Spark did not start with spark.master = '{master}': ConnectionError: no master accepts a connection (" in result.stderr
        assert "check spark.master" in result.stderr and "Traceback" not in result.stderr
        _nothing_written(tmp_path)
