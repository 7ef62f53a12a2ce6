"""Retention's grace period and the Delta log pruned by version (state/delta/cleanup.py), on real Delta tables."""

from __future__ import annotations

import os
import time
from pathlib import Path

from deltalake import DeltaTable

from epochal.state.checkpoint.retention import plan_table_release
from epochal.state.delta.cleanup import grace_versions, prune_log


def _commits(spark, path: Path, count: int) -> None:
    for i in range(count):
        spark.range(i, i + 3).coalesce(1).write.format("delta").mode("overwrite").save(str(path))


def _age_commit(path: Path, version: int, seconds_ago: float, now: float) -> None:
    os.utime(path / "_delta_log" / f"{version:020d}.json", (now - seconds_ago, now - seconds_ago))


def test_grace_keeps_every_version_that_was_latest_within_the_delay(spark, tmp_path):
    table = tmp_path / "t"
    _commits(spark, table, 4)
    now = time.time()
    for version, ago in [(0, 9000), (1, 7200), (2, 1800), (3, 60)]:
        _age_commit(table, version, ago, now)
    # version 1 was the latest an hour ago (a query may still read it); version 0 was not
    assert grace_versions(str(table), now=now, delay_s=3600) == {1, 2, 3}
    assert grace_versions(str(table), now=now, delay_s=0) == set()

    within = plan_table_release("s", "t", str(table), [], now=now, delay_s=3600)
    assert within.kept_versions == (1, 2, 3)
    assert not [p for p in within.delete if p.endswith(".parquet")], "version 0's file was written within the hour"
    assert spark.read.format("delta").option("versionAsOf", 1).load(str(table)).count() == 3

    later = plan_table_release("s", "t", str(table), [], now=now + 7200, delay_s=3600)
    assert later.kept_versions == (3,), "two hours on, only the latest version is kept"
    assert len([p for p in later.delete if p.endswith(".parquet")]) == 3


def test_the_log_is_pruned_up_to_the_delta_checkpoint_before_the_oldest_needed_version(spark, tmp_path):
    table = tmp_path / "t"
    _commits(spark, table, 13)  # Delta writes a log checkpoint at version 10
    log_dir = table / "_delta_log"
    assert (log_dir / f"{10:020d}.checkpoint.parquet").exists()
    now = time.time() + 1

    assert prune_log(str(table), 9, now=now) == [], "no checkpoint precedes version 9: nothing goes"
    assert prune_log(str(table), 11, now=now, delay_s=3600) == [], "the entries are younger than the grace period"
    deleted = prune_log(str(table), 11, now=now)
    assert f"{0:020d}.json" in {Path(d).name for d in deleted} and len(deleted) >= 10
    left = sorted(p.name for p in log_dir.iterdir() if p.name[:20].isdigit())
    assert min(int(n[:20]) for n in left) == 10

    for version in (10, 11, 12):  # every version from the checkpoint on stays readable, by Spark and delta-rs
        assert spark.read.format("delta").option("versionAsOf", version).load(str(table)).count() == 3
        assert DeltaTable(str(table), version=version).to_pyarrow_table().num_rows == 3
