"""Part 6: a backfill of 24 hourly partitions through the Dagster daemon, one run against one run per epoch.

Both sides start ``epochal ui`` (``dagster dev``: webserver, daemon, code server) on
their own deployment and Dagster instance, over the same generated data, and
launch a backfill of the whole range over GraphQL, as the UI does:

- ``one_run``: an asset backfill (the asset graph's *Materialize* over the range):
  one run, one process, one SparkSession for every epoch;
- ``run_per_epoch``: ``dagster.backfill_chunk: 1`` and the job's partition set:
  what every backfill was before, one run (one process, one JVM) per epoch.

Dagster's backfill daemon looks for new backfills every 30 s (a constant in Dagster 1.13) and marks one
done on its first tick after the last run ends: a backfill launched at a random moment waits 15 s on
average for each. Launched as soon as the webserver answered, the bench always fell at the same place in
that cycle (28 to 33 s before the run's launch, 2026-12-04). ``one_run`` is therefore measured in
``rounds`` (3), each launched a different share of the 30 s later (5, 15, 25 s after the webserver
answers), and reported by the round of median ratio, with every round and the daemon's two waits of each
(from the instance's records: launch to the run's creation, the run's end to the backfill's end).

Measured: the wall time from the launch to the backfill's end (polled every 3 s),
the runs it took, and, for ``one_run``, the sum of its epochs' own durations (the
``epoch_duration_s`` metadata of each partition's ``checkpoint`` materialization):
the ratio of the wall time to that sum is the backfill's overhead. The issue's target
divides by that sum plus one session start (``session_start_s``: a fresh process that
imports epochal and builds the deployment's SparkSession, as the run's process does once).
``--backfill-sides`` measures one side again and keeps the other side's last figures.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import WORK, deployment_config, ratio
from bench.dataset import Dataset

ASSETS = ["parse", "dedupe", "aggregate_users", "aggregate_hours", "sessionize", "quarantine", "user_totals",
          "hourly_revenue", "sessions", "late_events", "checkpoint"]
SIDES = {"one_run": None, "run_per_epoch": 1}
DAEMON_INTERVAL_S = 30  # dagster._daemon.controller.DEFAULT_DAEMON_INTERVAL_SECONDS, the backfill daemon's cycle


def _config(ds: Dataset, work: Path, chunk: int | None, port: int) -> Path:
    path = deployment_config(work / "epochal.yaml", pipeline="clickstream", landing=str(ds.landing), work=work)
    doc = yaml.safe_load(path.read_text())
    doc["dagster"] = {"home": str(work / "dagster"), "webserver_port": port, "schedule_enabled": False,
                      "backfill_chunk": chunk}
    path.write_text(yaml.safe_dump(doc))
    return path


def _epoch_seconds(home: Path, partitions: list[str]) -> list[float]:
    """Each partition's ``epoch_duration_s``, from the instance's ``checkpoint`` materializations."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(dg.AssetKey("checkpoint"), limit=10 * len(partitions)).records
    found = {r.asset_materialization.partition: r.asset_materialization.metadata["epoch_duration_s"].value for r in records}
    return [float(found[p]) for p in partitions if p in found]


def _daemon_waits(home: Path) -> dict[str, float]:
    """The backfill daemon's two waits, from the instance's records: launch to the first run's creation,
    and the last run's end to the backfill's end."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        (record,) = instance.get_backfills(limit=1)
        runs = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": record.backfill_id}))
        if not runs or record.backfill_end_timestamp is None:
            return {}
        first = min(r.create_timestamp.timestamp() for r in runs)
        last = max(r.end_time or 0.0 for r in runs)
        return {"to_first_run_s": round(first - record.backfill_timestamp, 1),
                "after_last_run_s": round(record.backfill_end_timestamp - last, 1)}


def backfill(ds: Dataset, work: Path, chunk: int | None, *, delay_s: float = 0.0) -> dict[str, Any]:
    """One side: start ``epochal ui``, launch the backfill ``delay_s`` after the webserver answers, wait for it,
    stop; what it took."""
    import shutil

    from epochal.orchestration import ui
    from tests.support.dagster_live import GraphQL, free_port

    shutil.rmtree(work, ignore_errors=True)
    config = _config(ds, work, chunk, free_port())
    procs = ui.start(str(config))
    try:
        gql = GraphQL(procs.url)
        gql.wait_ready(600, alive=lambda: procs.dev.poll() is None)
        partitions = ds.partitions()
        time.sleep(delay_s)  # where in the daemon's cycle the launch falls (not measured)
        started = time.monotonic()
        if chunk is None:
            backfill_id = gql.launch_asset_backfill(ASSETS, partitions)
        else:
            backfill_id = gql.launch_job_backfill("clickstream_epochs", partitions)
        status = gql.wait_backfill(backfill_id, 6 * 3600)
        wall = round(time.monotonic() - started, 1)
        runs = gql.runs_with_tag("dagster/backfill", backfill_id)
    finally:
        procs.stop()
    epochs = _epoch_seconds(work / "dagster", partitions)
    return {"status": status, "wall_s": wall, "runs": len(runs), "failed_runs": sum(r["status"] != "SUCCESS" for r in runs),
            "epochs_reported": len(epochs), "epochs_sum_s": round(sum(epochs), 1), "delay_s": delay_s,
            "daemon_waits": _daemon_waits(work / "dagster")}


def one_run_rounds(ds: Dataset, work: Path, rounds: int) -> list[dict[str, Any]]:
    """``rounds`` one-run backfills, each on its own deployment, launched at evenly spread places of the
    daemon's cycle."""
    step = DAEMON_INTERVAL_S / rounds
    return [backfill(ds, work / f"backfill-one_run-{i + 1}", None, delay_s=round(step * (i + 0.5), 1))
            for i in range(rounds)]


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of median ratio (of an even number, the higher of the middle two)."""
    ordered = sorted(rounds, key=lambda r: r["ratio_with_session_start"] or 0.0)
    return ordered[len(ordered) // 2]


def session_start_s(config: Path) -> float:
    """Wall seconds of a fresh process that builds the deployment's SparkSession and stops (one session start)."""
    import subprocess
    import sys

    code = ("from epochal.config import load_settings; from epochal.state.session import build_spark_session; "
            f"s = load_settings({str(config)!r}); build_spark_session(s.spark, locations=s.storage_locations()).stop()")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=600)
    return round(time.monotonic() - started, 1)


def measure(
    work: Path = WORK, *, events: int = 5_000, hours: int = 24, sides=tuple(SIDES), previous: dict | None = None,
    rounds: int = 3,
) -> dict[str, Any]:
    """Both sides (or ``sides``; a side not measured keeps its figures from ``previous`` when they are for the
    same data, with ``kept_from`` saying so), a session start, and the ratios; ``one_run`` in ``rounds``."""
    ds = Dataset(work / f"data-{events}x{hours}", events, hours)
    ds.ensure()
    out: dict[str, Any] = {"events": events, "partitions": hours}
    same_data = previous is not None and (previous.get("events"), previous.get("partitions")) == (events, hours)
    for side, chunk in SIDES.items():
        if side == "one_run" and side in sides:
            out["one_run_rounds"] = one_run_rounds(ds, work, rounds)
            out["session_start_s"] = session_start_s(work / "backfill-one_run-1" / "epochal.yaml")
            for r in out["one_run_rounds"]:
                r["ratio_with_session_start"] = ratio(r["wall_s"], r["epochs_sum_s"] + out["session_start_s"])
            out[side] = median_round(out["one_run_rounds"])
        elif side in sides:
            out[side] = backfill(ds, work / f"backfill-{side}", chunk)
        elif same_data and side in previous:
            out[side] = {**previous[side], "kept_from": previous[side].get("kept_from", previous.get("measured_at"))}
            if side == "one_run" and "one_run_rounds" in previous:
                out["one_run_rounds"] = previous["one_run_rounds"]
    if same_data and "session_start_s" not in out and "session_start_s" in previous:
        out["session_start_s"] = previous["session_start_s"]
    out["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    one, per_epoch = out.get("one_run"), out.get("run_per_epoch")
    out["one_run_vs_run_per_epoch"] = ratio(one["wall_s"], per_epoch["wall_s"]) if one and per_epoch else None
    out["one_run_vs_its_epochs"] = ratio(one["wall_s"], one["epochs_sum_s"]) if one else None
    start = out.get("session_start_s")
    out["one_run_vs_its_epochs_and_a_session_start"] = (
        ratio(one["wall_s"], one["epochs_sum_s"] + start) if one and start is not None else None
    )
    return out
