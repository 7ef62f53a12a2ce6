"""Part 1: epoch time of the clickstream example against the Structured Streaming job.

For one size (events per epoch) and one mode:

- ``fresh``: every epoch of every side is its own process (a scheduled run);
  the sides alternate epoch by epoch (which one goes first alternates too), so
  that the load of a shared machine falls on both alike;
- ``inprocess``: each side runs all its epochs in one process.

Each side starts from empty state and output. After the last epoch a child
checks that the epochal warehouses hold the same ``user_totals`` and
``hourly_revenue`` as the Structured Streaming one (:mod:`bench.verify`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bench import steps
from bench.common import WORK, median, ratio, run_child
from bench.dataset import Dataset
from bench.epochal_job import write_config

MODES = ("fresh", "inprocess")


def _ss(ds: Dataset, work: Path, partitions: list[str]) -> dict[str, Any]:
    return run_child("bench.ss_job", ["--landing", ds.landing, "--work", work, "--partitions", ",".join(partitions)])


def _epochal(config: Path, partitions: list[str]) -> dict[str, Any]:
    return run_child("bench.epochal_job", ["--config", config, "--partitions", ",".join(partitions)])


def _fresh(ds: Dataset, ss_work: Path, configs: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"ss": [], **{v: [] for v in configs}}
    for i, partition in enumerate(ds.partitions()):
        order = ["ss", *configs] if i % 2 == 0 else [*configs, "ss"]
        for side in order:
            if side == "ss":
                runs["ss"].append(_ss(ds, ss_work, [partition]))
            else:
                runs[side].append(_epochal(configs[side], [partition]))
    return runs


def _inprocess(ds: Dataset, ss_work: Path, configs: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    runs = {"ss": [_ss(ds, ss_work, ds.partitions())]}
    for variant, config in configs.items():
        runs[variant] = [_epochal(config, ds.partitions())]
    return runs


def _epoch_rows(runs: list[dict[str, Any]], fresh: bool) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for epoch in run["epochs"]:
            row = {"partition": epoch["partition"], "epoch_s": epoch["epoch_s"]}
            if fresh:
                row |= {"process_s": run["wall_s"], "setup_s": run["setup_s"]}
            rows.append(row)
    return rows


def summarize(runs: dict[str, list[dict[str, Any]]], mode: str) -> dict[str, Any]:
    fresh = mode == "fresh"
    sides = {side: _epoch_rows(r, fresh) for side, r in runs.items()}
    out: dict[str, Any] = {"epochs": sides, "median_epoch_s": {}, "memory": {}}
    for side, rows in sides.items():
        out["median_epoch_s"][side] = median([r["epoch_s"] for r in rows])
        if fresh:
            out.setdefault("median_process_s", {})[side] = median([r["process_s"] for r in rows])
        out["memory"][side] = {k: max(r["memory"][k] for r in runs[side]) for k in runs[side][0]["memory"]}
    out["ratio_epoch"] = {v: ratio(out["median_epoch_s"][v], out["median_epoch_s"]["ss"]) for v in sides if v != "ss"}
    if fresh:
        out["ratio_process"] = {
            v: ratio(out["median_process_s"][v], out["median_process_s"]["ss"]) for v in sides if v != "ss"
        }
    return out


def run_size(events: int, epochs: int, *, modes=MODES, variants=("full", "core"), work: Path = WORK) -> dict[str, Any]:
    """Both modes at one size; returns the summary per mode with the correctness check."""
    ds = Dataset(work / f"data-{events}", events, epochs)
    totals = ds.ensure()
    result: dict[str, Any] = {"events_per_epoch": events, "epochs": epochs, "input": totals}
    for mode in modes:
        base = work / f"epochs-{events}-{mode}"
        shutil.rmtree(base, ignore_errors=True)
        configs = {v: write_config(base / v / "epochal.yaml", variant=v, landing=str(ds.landing), work=base / v) for v in variants}
        runs = (_fresh if mode == "fresh" else _inprocess)(ds, base / "ss", configs)
        summary = summarize(runs, mode)
        check = run_child(
            "bench.verify",
            ["--expected", base / "ss" / "warehouse", *[x for v in variants for x in ("--actual", base / v / "warehouse")]],
        )
        summary["correctness"] = check
        if mode == "inprocess":
            summary["steps"] = {v: steps.summarize(runs[v], base / v) for v in variants}
        result[mode] = summary
    return result
