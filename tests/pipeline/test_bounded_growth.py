"""Checkpoint storage stays the size of what the retained checkpoints need, however many epochs run (issue 19).

Many small epochs of the toy pipeline with ``retain: 3`` in one process; after each epoch every kind of
thing in checkpoint storage is counted (store rows, claimed ids, recorded plans, stats, the Delta log
files of the store and of each state table, data files, folders). Past the first epochs no count may grow.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.checkpoint.store import RELEASED_HISTORY
from epochal.state.delta.io import CHECKPOINT_INTERVAL_DEFAULT_CONF, table_properties

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

EPOCHS = int(os.environ.get("EPOCHAL_GROWTH_EPOCHS", "28"))  # EPOCHAL_GROWTH_EPOCHS=500 for the long run
WARM_UP = 13  # retain 3 plus RELEASED_HISTORY store rows reached, and a Delta log checkpoint written
# Epochs between two Delta log checkpoints of a state table (one commit an epoch). State tables checkpoint every
# 100 commits unless the session names Delta's default for new tables: 10 here, for the saw-tooth to repeat within
# the test's epochs (the log stays bounded by whatever period).
PERIOD = 10


def inventory(checkpoints: Path, store_rows: int, stats: int) -> Counter:
    """How many of each kind of thing checkpoint storage holds."""
    counts: Counter = Counter(store_rows=store_rows, stats=stats)
    for path in checkpoints.rglob("*"):
        if path.is_dir():
            continue
        relative = path.relative_to(checkpoints)
        top = relative.parts[0]
        if "_delta_log" in relative.parts:
            table = "/".join(relative.parts[: relative.parts.index("_delta_log")])
            counts[f"log:{table}"] += 1
        elif top == "shared":
            counts[f"data:{'/'.join(relative.parts[:3])}"] += 1
        elif top == "_completed":
            counts["data:_completed"] += 1
        elif top.startswith("chk-"):
            counts["chk-dirs"] += 0
            counts["chk-files"] += 1
        else:
            counts[top] += 1
    counts["chk-dirs"] = sum(1 for p in checkpoints.glob("chk-*"))
    return counts


def test_checkpoint_storage_stays_flat(spark, tmp_path, toy_registered):
    landing = tmp_path / "landing"
    for hour in range(EPOCHS):
        toy.write_hour(landing, hour, [(f"k{hour % 5}", hour), ("all", 1)])
    config = {
        "pipeline": "toy", "landing": str(landing), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints"), "interval_epochs": 1, "retain": 3,
                        "stats_history": 5, "cleanup_delay_s": 0},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    spark.conf.set(CHECKPOINT_INTERVAL_DEFAULT_CONF, str(PERIOD))
    try:
        seen, runner = _run_and_count(spark, tmp_path, load_settings(path))
    finally:
        spark.conf.unset(CHECKPOINT_INTERVAL_DEFAULT_CONF)
    for table in (tmp_path / "checkpoints" / "shared").glob("*/*"):
        assert table_properties(str(table))["delta.checkpointInterval"] == str(PERIOD)

    # Delta writes a log checkpoint every PERIOD commits, so log counts saw-tooth with that period: compare each
    # late epoch with the epoch one period earlier, after the first period (which has no checkpoint to keep).
    kinds = sorted(set().union(*seen))
    late = range(max(WARM_UP + PERIOD, EPOCHS - PERIOD), EPOCHS)
    growing = {k: [c[k] for c in seen] for k in kinds if any(seen[e][k] > seen[e - PERIOD][k] for e in late)}
    assert not growing, f"these kept growing after {WARM_UP} epochs: {growing}"
    assert seen[-1]["store_rows"] == 3 + RELEASED_HISTORY and seen[-1]["stats"] == 5
    assert seen[-1]["chk-dirs"] == 3
    _retained_versions_readable_and_nothing_orphaned(spark, runner)


def _run_and_count(spark, tmp_path: Path, settings) -> tuple[list[Counter], EpochRunner]:
    """The runner, and what checkpoint storage holds after each of its epochs."""
    runner = EpochRunner(build_deployment(settings, spark))
    seen: list[Counter] = []
    for hour in range(EPOCHS):
        runner.run(to=f"2026-11-01-{hour:02d}:00" if hour < 24 else f"2026-11-02-{hour - 24:02d}:00")
        store = runner.d.coordinator.store
        rows = spark.read.format("delta").load(store.table_url).count()
        seen.append(inventory(tmp_path / "checkpoints", rows, len(runner.d.coordinator.stats.history())))
    return seen, runner


def _retained_versions_readable_and_nothing_orphaned(spark, runner) -> None:
    """Checked with readers independent of retention's own log replay: Spark time travel, delta-rs."""
    from urllib.parse import unquote, urlparse

    from deltalake import DeltaTable

    from epochal.state.delta.paths import resolve_table_url

    needed: dict[str, set[int]] = {}
    for entry in runner.d.coordinator.store.all():
        for handle in entry.handles:
            needed.setdefault(resolve_table_url(handle, entry.metadata_path), set()).add(handle.version)
    assert needed, "the retained checkpoints reference state tables"
    for url, versions in needed.items():
        root = Path(urlparse(url).path if "://" in url else url)
        used: set[str] = set()
        for version in sorted(versions) + [None]:
            reader = spark.read.format("delta")
            frame = (reader.option("versionAsOf", version) if version is not None else reader).load(str(root))
            frame.count()  # time travel to every retained version works after the log was pruned
            used |= {unquote(urlparse(f).path) for f in frame.inputFiles()}
        on_disk = {str(p) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}
        assert on_disk - used == set(), f"{url}: data files no retained version reads"
    store = DeltaTable(runner.d.coordinator.store.table_url)  # delta-rs opens the pruned store table
    assert store.to_pyarrow_table().num_rows == spark.read.format("delta").load(runner.d.coordinator.store.table_url).count()
