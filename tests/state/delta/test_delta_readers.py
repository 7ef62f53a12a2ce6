"""Delta tables are read by more than Spark: every sink of the example and every state table of a
savepoint opens with delta-rs (``deltalake``, what polars and pandas users read Delta with) and
holds what Spark reads; keyed state tables keep deletion vectors, sinks and savepoints do not."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import deltalake
import pytest

from epochal.config import Settings
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
PARTITIONS = 3


@pytest.fixture(scope="module")
def ran(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("readers")
    generate(str(root / "landing"), START, PARTITIONS, GeneratorConfig(users=6, events_per_hour=30, seed=11))
    _add_extreme_times(root / "landing")
    settings = Settings.model_validate({
        "landing": str(root / "landing"),
        "warehouse": str(root / "warehouse"),
        "checkpoints": {"dir": str(root / "checkpoints"), "retain": 2, "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2},
    })
    runner = EpochRunner(build_deployment(settings, spark))
    runner.run(to="2026-11-01-02:00")
    savepoint = runner.savepoint("readers")
    return runner.d, Path(savepoint["path"].removeprefix("file://"))


def _add_extreme_times(landing: Path) -> None:
    """Events in years 1600 and 2300 (the example takes 1 to 9999; PySpark cannot collect the ends): Spark wrote
    timestamps as INT96, which delta-rs reads as nanoseconds, and it refused a table holding a year past 2262 or
    before 1677 (found from outside)."""
    last = sorted((landing / "dt=2026-11-01" / "hour=02").glob("*.jsonl"))[-1]
    with last.open("a") as fh:
        for n, when in enumerate(("1600-01-01T00:00:00Z", "2300-12-31T23:59:59.999999Z")):
            fh.write(f'{{"event_id": "extreme-{n}", "user_id": "u-extreme", "event_type": "purchase", "amount": 1.5, '
                     f'"event_time": "{when}"}}\n')


def _normal(value):
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, dict):
        return tuple(sorted((k, _normal(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        # delta-rs gives a map as a list of (key, value) pairs
        return tuple(_normal(v) for v in value)
    return value


def _rows(records: list[dict], columns: list[str]) -> list[tuple]:
    return sorted((tuple(repr(_normal(r[c])) for c in columns) for r in records))


def _same_as_spark(spark, path: Path) -> int:
    """Open ``path`` with delta-rs and Spark; assert the same schema names and rows; return the rows."""
    table = deltalake.DeltaTable(str(path))  # raises for a reader feature delta-rs lacks (deletion vectors)
    ours = table.to_pyarrow_table().to_pylist()
    theirs = [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(path)).collect()]
    columns = sorted(spark.read.format("delta").load(str(path)).columns)
    assert sorted(table.schema().to_arrow().names) == columns
    if ours and isinstance(next(iter(ours[0].values()), None), list):
        pass
    assert _rows(ours, columns) == _rows(_as_maps(theirs), columns), path
    return len(ours)


def _as_maps(records: list[dict]) -> list[dict]:
    """Spark's maps come back as dicts, delta-rs's as lists of pairs: compare them as pairs."""
    return [{k: (sorted(v.items()) if isinstance(v, dict) else v) for k, v in r.items()} for r in records]


def test_every_sink_opens_with_delta_rs_and_equals_spark(ran, spark):
    deployment, _ = ran
    rows = {name: _same_as_spark(spark, Path(sink.path)) for name, sink in deployment.sinks.items()}
    assert rows["user_totals"] > 0 and rows["hourly_revenue"] > 0, rows
    totals = deltalake.DeltaTable(deployment.sinks["user_totals"].path).to_pyarrow_table().to_pylist()
    extreme = next(r for r in totals if r["user_id"] == "u-extreme")
    assert (extreme["first_event_time"].year, extreme["last_event_time"].year) == (1600, 2300), extreme
    for name, sink in deployment.sinks.items():
        protocol = deltalake.DeltaTable(sink.path).protocol()
        assert "deletionVectors" not in (protocol.reader_features or []), name


def test_every_state_table_of_a_savepoint_opens_with_delta_rs(ran, spark):
    _, savepoint = ran
    tables = sorted(p.parent for p in savepoint.rglob("_delta_log"))
    assert len(tables) >= 4, tables  # dedupe, sessions, timers, watermark...
    for path in tables:
        _same_as_spark(spark, path)


def test_keyed_state_tables_keep_deletion_vectors(ran):
    deployment, _ = ran
    shared = Path(deployment.shared_root.removeprefix("file://"))
    keyed = [p.parent for p in shared.rglob("_delta_log")]
    features = {str(p.relative_to(shared)): deltalake.DeltaTable(str(p)).protocol().reader_features or [] for p in keyed}
    assert features and any("deletionVectors" in f for f in features.values()), features


def test_the_readmes_delta_rs_snippet_reads_a_sink_in_a_fresh_process_that_exits_cleanly(ran):
    """The README's reading snippet, run as a user's script: the rows Spark reads, and exit status 0 (a read
    through pyarrow's dataset scanner, ``to_pandas()``, often aborts as Python exits: delta-io/delta-rs#2184)."""
    import re
    import subprocess
    import sys

    deployment, _ = ran
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "def read_delta" in block)
    sink = deployment.sinks["user_totals"]
    path = sink.path.removeprefix("file://")
    script = snippet + f"\nprint(read_delta({path!r}).num_rows)\n"
    for _ in range(3):  # the abort, where it happens, is in most runs, not all
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert int(done.stdout.strip()) == deployment.spark.read.format("delta").load(sink.path).count()
