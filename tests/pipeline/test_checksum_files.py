"""A run's last epoch writes Delta's version checksum files; the epochs before it do not.

A JVM that opens a Delta table at a version without its checksum file (``<version>.crc``) reconstructs the
version's protocol and metadata with a Spark job (and, after its first commit, the table's state with more);
with the file it reads them from it. Within a process Delta carries each table's state from commit to commit
in memory, so only the versions a new process opens first need the file: those of the run's last epoch
(and version 0, which epochal writes from the log when it creates a table: see ``state/delta/create.py``).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from epochal.state.session import CHECKSUM_FILES
from tests.pipeline.test_runner import EXPECTED_LOG, EXPECTED_TOTALS, _deploy, _runner, _sinks

_VERSION_CHECKSUM = re.compile(r"(\d{20})\.crc")  # Hadoop's own .<file>.crc guards are not these


def _versions(table: Path, pattern: re.Pattern[str]) -> set[int]:
    return {int(m.group(1)) for p in (table / "_delta_log").iterdir() if (m := pattern.fullmatch(p.name))}


def _committed(table: Path) -> set[int]:
    return _versions(table, re.compile(r"(\d{20})\.json"))


def _jobs_opening(spark, path: str) -> int:
    """Spark jobs a JVM runs to open ``path`` afresh (Delta's cache of the table dropped first)."""
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    group = f"open-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, group)
    try:
        spark.read.format("delta").load(path).schema  # the snapshot: protocol and metadata
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_only_the_announced_runs_last_epoch_writes_checksum_files(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path))
    runner.expect_run(to="2026-11-01-03:00")  # one run to 03:00, its epochs asked for one at a time
    reports = [runner.run(to=f"2026-11-01-0{hour}:00").epochs[0] for hour in range(4)]

    assert [e.checksums for e in reports] == [False, False, False, True]
    assert spark.conf.get(CHECKSUM_FILES) == "false"  # the session's own value is back
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    tables = [Path(sink.path) for sink in runner.d.sinks.values()]
    tables += [p.parent for p in (tmp_path / "checkpoints" / "shared").rglob("_delta_log")]  # the state tables
    assert len(tables) == 4  # (the completed-checkpoint store is delta-rs's: no checksum files)
    for table in tables:
        newest = max(_committed(table))
        # the last epoch's commit, and version 0 (the table's creation, written from the log with its checksum)
        assert _versions(table, _VERSION_CHECKSUM) == {0, newest}, table

    assert _jobs_opening(spark, str(tables[0])) == 0  # what the next process does first: no Spark job


def test_a_version_without_its_checksum_file_is_opened_with_a_job(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)  # the session default: no checksum file
    assert _versions(tmp_path / "t", _VERSION_CHECKSUM) == set()
    assert _jobs_opening(spark, path) >= 1
    spark.conf.set(CHECKSUM_FILES, "true")
    try:
        spark.range(3, 5).write.format("delta").mode("append").save(path)
    finally:
        spark.conf.set(CHECKSUM_FILES, "false")
    assert _versions(tmp_path / "t", _VERSION_CHECKSUM) == {1}
    assert _jobs_opening(spark, path) == 0
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 1, 2, 3, 4]
    from deltalake import DeltaTable  # delta-rs opens it too

    assert DeltaTable(path).version() == 1 and sorted(DeltaTable(path).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_a_configuration_that_sets_the_key_decides(spark, tmp_path, toy_registered):
    import yaml

    config = _deploy(tmp_path)
    settings = yaml.safe_load(config.read_text())
    settings["spark"]["conf"] = {CHECKSUM_FILES: "true"}
    config.write_text(yaml.safe_dump(settings))
    runner = _runner(spark, config)
    try:
        reports = runner.run(to="2026-11-01-01:00").epochs
    finally:
        spark.conf.set(CHECKSUM_FILES, "false")  # the test session's value (a configuration's conf is the session's)
    assert [e.checksums for e in reports] == ["spark.conf", "spark.conf"]
