"""Part 1: epoch time of the clickstream example against the Structured Streaming job.

For one size (events per epoch) and one mode:

- ``fresh``: every epoch of every side is its own process (a scheduled run);
  the sides alternate epoch by epoch (which one goes first alternates too), so
  that the load of a shared machine falls on both alike;
- ``inprocess``: each side runs all its epochs in one process; with ``rounds`` above 1
  every side does so that many times, each time from empty state, in rounds whose
  order rotates (ss, full, core; then full, core, ss; ...), so that a drift in the
  shared machine's load over minutes does not fall on one side. Medians pool the
  rounds' epochs.

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


def _inprocess(
    ds: Dataset, base: Path, variants: tuple[str, ...], rounds: int = 1
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Path]]]:
    """Each side's runs (one per round, all epochs in one process) and each run's work folder."""
    sides = ["ss", *variants]
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    works: dict[str, list[Path]] = {side: [] for side in sides}
    for r in range(rounds):
        folder = base if rounds == 1 else base / f"round-{r}"
        for side in sides[r % len(sides):] + sides[: r % len(sides)]:
            work = folder / side
            if side == "ss":
                runs[side].append(_ss(ds, work, ds.partitions()))
            else:
                config = write_config(work / "epochal.yaml", variant=side, landing=str(ds.landing), work=work)
                runs[side].append(_epochal(config, ds.partitions()))
            works[side].append(work)
    return runs, works


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


def run_size(
    events: int, epochs: int, *, modes=MODES, variants=("full", "core"), work: Path = WORK, rounds: int = 1
) -> dict[str, Any]:
    """Both modes at one size; returns the summary per mode with the correctness check.

    ``rounds``: how many times the in-process mode runs each side (rotating the order); fresh mode alternates
    epoch by epoch already and runs once.
    """
    ds = Dataset(work / f"data-{events}", events, epochs)
    totals = ds.ensure()
    result: dict[str, Any] = {"events_per_epoch": events, "epochs": epochs, "input": totals}
    for mode in modes:
        base = work / f"epochs-{events}-{mode}"
        shutil.rmtree(base, ignore_errors=True)
        if mode == "fresh":
            configs = {v: write_config(base / v / "epochal.yaml", variant=v, landing=str(ds.landing), work=base / v)
                       for v in variants}
            runs = _fresh(ds, base / "ss", configs)
            works = {side: [base / side] for side in runs}
        else:
            runs, works = _inprocess(ds, base, tuple(variants), rounds)
        summary = summarize(runs, mode)
        last = {side: folders[-1] for side, folders in works.items()}  # the last round's outputs are compared
        check = run_child(
            "bench.verify",
            ["--expected", last["ss"] / "warehouse",
             *[x for v in variants for x in ("--actual", last[v] / "warehouse")]],
        )
        summary["correctness"] = check
        if mode == "inprocess":
            summary["rounds"] = rounds
            summary["steps"] = {v: steps.summarize(runs[v], works[v]) for v in variants}
        result[mode] = summary
    return result
