"""The orders example end to end: three epochs through the runner, checked against a plain-Python
reference (sinks and every state table), then a restore of the middle checkpoint and a run on."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from epochal.config import ConfigError, load_settings
from epochal.pipeline.examples.orders import generator, reference
from epochal.pipeline.examples.orders.options import OrdersOptions
from epochal.pipeline.examples.orders.stages import ActivityStage, CustomersStage, PriceStage, LAST_ORDER
from epochal.pipeline.registry import build_deployment, build_pipeline, resolve_pipeline
from epochal.pipeline.runner import EpochRunner
from epochal.state.delta import io as delta_io

KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]
OPTIONS = {"inactivity": "1h", "allowed_lateness": "15m", "last_items": 3}


def _config(tmp: Path, **options) -> Path:
    config = {
        "pipeline": "orders",
        "landing": str(tmp / "landing"),
        "warehouse": str(tmp / "warehouse"),
        "checkpoints": {"dir": str(tmp / "checkpoints"), "retain": 5},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
        "options": {**OPTIONS, **options},
    }
    path = tmp / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _utc(moment: datetime | None) -> datetime | None:
    """A timestamp collected from Spark (naive, in this process's local time) as naive UTC."""
    return None if moment is None else moment.astimezone(timezone.utc).replace(tzinfo=None)


def test_orders_is_a_built_in_name_and_an_entry_point_with_validated_options(tmp_path):
    from importlib.metadata import entry_points

    assert callable(resolve_pipeline("orders"))
    assert [e.value for e in entry_points(group="epochal.pipelines", name="orders")] == [
        "epochal.pipeline.examples.orders.pipeline:build_pipeline"
    ]
    pipeline = build_pipeline(load_settings(_config(tmp_path)))
    assert [s.name for s in pipeline.ordered_stages][0] == "price" and [s.name for s in pipeline.sinks] == [
        "customer_summary", "alerts",
    ]
    assert load_settings(_config(tmp_path)).pipeline_options(OrdersOptions).inactivity == timedelta(hours=1)
    with pytest.raises(ConfigError, match="options.last_item"):
        build_pipeline(load_settings(_config(tmp_path, last_item=3)))
    with pytest.raises(ConfigError, match="options.inactivity"):
        build_pipeline(load_settings(_config(tmp_path, inactivity="soon")))


def _summary(runner) -> dict:
    rows = runner.d.sinks["customer_summary"].read().collect()
    return {r.customer: (r.orders, r.total_spend, r.avg_order, r.last_items, r.favourite_item) for r in rows}


def _alerts(runner) -> list:
    rows = runner.d.sinks["alerts"].read().collect()
    return sorted(((r.epoch, r.customer, r.kind, _utc(r.at), r.order_id) for r in rows), key=str)


def _keyed(runner, stage: str, descriptor, column="value") -> dict:
    return {r.key: r[column] for r in runner.d.keyed[stage].read(descriptor).collect()}


def test_three_epochs_match_the_reference_and_a_restore_runs_on_to_the_same_sinks(spark, tmp_path):
    landing = str(tmp_path / "landing")
    generator.generate(landing)
    settings = load_settings(_config(tmp_path))
    options = settings.pipeline_options(OrdersOptions)
    runner = EpochRunner(build_deployment(settings, spark))

    report = runner.run(to=KEYS[-1])
    assert [e.checkpoint_status for e in report.epochs] == ["completed"] * 3

    # -- sinks, against the reference computed from the landing files
    exp = reference.expected(landing, generator.START, 3, options)
    assert {kind for _, _, kind, _, _ in exp.alerts} == {"inactive", "late_order", "unpriced_order"}  # the data covers them
    assert _summary(runner) == exp.summary()
    assert _alerts(runner) == sorted(exp.alerts, key=str)

    # -- every state kind's table
    assert _keyed(runner, "customers", CustomersStage.TOTAL_SPEND) == exp.total_spend  # reducing
    stats = _keyed(runner, "customers", CustomersStage.ORDER_STATS)  # aggregating: the accumulator is stored
    assert {c: (acc.sum, acc.orders) for c, acc in stats.items()} == exp.order_stats
    averages = {r.key: r.value for r in runner.d.keyed["customers"].values(CustomersStage.ORDER_STATS).collect()}
    assert averages == {c: s / n for c, (s, n) in exp.order_stats.items()}  # values() applies result()
    assert _keyed(runner, "customers", CustomersStage.LAST_ITEMS) == exp.last_items  # list
    assert _keyed(runner, "customers", CustomersStage.SPEND_PER_ITEM) == dict(exp.spend_per_item)  # map
    assert {k: _utc(v) for k, v in _keyed(runner, "activity", LAST_ORDER).items()} == exp.last_order  # value
    timers = ActivityStage.TIMERS.read(runner.d.keyed["activity"]).collect()
    assert {r.key: _utc(r.timestamp) for r in timers} == exp.timers  # event-time timers
    rates = runner.d.operator["price"].read_raw(PriceStage.RATES).collect()  # broadcast
    assert {r.map_key: r.value for r in rates} == exp.rates and exp.rates["EUR"] == 1.0  # the hour-2 file changed it

    # -- restore the middle checkpoint (epoch 1): the sinks rewind, then running on equals the straight run
    straight = {name: (sink.path, delta_io.current_version(spark, sink.path)) for name, sink in runner.d.sinks.items()}
    middle = [c for c in runner.d.coordinator.store.all() if int(c.metadata.epoch) == 1 and not c.is_savepoint]
    assert runner.restore(int(middle[0].checkpoint_id)).epoch == 1
    assert _summary(runner) == reference.expected(landing, generator.START, 2, options).summary()  # back to its recorded version
    assert [e.epoch for e in runner.run(to=KEYS[-1]).epochs] == [2]
    for name, (path, version) in straight.items():
        before = spark.read.format("delta").option("versionAsOf", version).load(path)
        after = runner.d.sinks[name].read()
        assert before.count() == after.count() > 0, name
        assert before.exceptAll(after).isEmpty() and after.exceptAll(before).isEmpty(), name


@pytest.mark.slow
@pytest.mark.timeout(2400)  # six scenarios, two of them in killed processes: 10 minutes alone, more beside another worker
def test_epochal_verify_passes_on_the_orders_example(tmp_path):
    """Every state kind (reducing, aggregating, list, map, timers, broadcast) and both sink modes, through
    ``epochal verify``: straight twice, restores (one with another parallelism), and SIGKILLs at two points."""
    import json
    import subprocess
    import sys

    generator.generate(str(tmp_path / "landing"))
    config = _config(tmp_path)
    epochal = str(Path(sys.executable).with_name("epochal"))
    result = subprocess.run(
        [epochal, "verify", "--config", str(config), "--from", KEYS[0], "--to", KEYS[-1],
         "--points", "after_last_ack,in_stage", "--seeds", "0", "--json"],
        capture_output=True, text=True, timeout=1800, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["ok"] and report["epochs"] == 3
    assert {s["result"] for s in report["scenarios"]} <= {"reference", "match"}
    assert len(report["scenarios"]) == 6  # straight, again, restore, savepoint, two crashes
    assert report["warnings"] == []  # nothing in its plans (nor in epochal's own timers and per-key state) depends on a re-run
