"""Parts 3, 4 and 5 against state size: restore time, an epoch with and without a checkpoint, peak memory.

The fixture (``build``, once per size): the clickstream deployment whose
dedupe state (``dedupe/seen``) already holds ``N`` event ids (appended to the
state table in its own layout before epoch 0, as if seen in earlier hours),
then epochs 0 and 1 with a checkpoint each. ``checkpoints.interval_epochs`` is
large, so an epoch checkpoints only when forced.

A measurement (``measure``, a fresh process, several per size), from the
state at the end of epoch 1 or later:

1. warm-up (not counted): epoch 2, then restore the checkpoint of epoch 1;
2. epoch 2 without a checkpoint (the state moves past the last checkpoint),
   then restore the checkpoint of epoch 1 (``EpochRunner.restore``: state
   tables and sinks), timed, with the time in ``epochal.state.recovery.restore.restore_state``
   and in rewinding the sinks;
3. the same epoch 2 with a checkpoint, then the same restore.

Steps 2 and 3 swap places every other measurement (``--checkpoint-first``).

It reports the times and the process's peak memory (Python RSS, the driver
JVM's RSS and heap).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from bench.common import (
    Stopwatch, deployment_config, dir_bytes, emit, memory_report, median, ratio, reset_jvm_peaks, run_child,
)
from bench.dataset import START, Dataset

EVENTS_PER_EPOCH = 2000
FIXTURE_EPOCHS = 3


def _runner(work: Path, landing: str):
    from epochal.config import load_settings
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    config = deployment_config(
        work / "epochal.yaml", pipeline="clickstream", landing=landing, work=work, interval_epochs=100_000, retain=20
    )
    return EpochRunner(build_deployment(load_settings(config)))


def seed_dedupe(runner, keys: int) -> None:
    """Append ``keys`` event ids to the dedupe state, in the state table's own row layout."""
    from pyspark.sql import functions as F

    from epochal.state.keygroups import key_group_col

    d = runner.d
    stage = next(s for s in d.pipeline.stages if s.name == "dedupe")
    backend = d.keyed["dedupe"]
    path = backend.open(stage.seen)
    clock = START + timedelta(hours=1)
    ids = d.spark.range(0, keys, 1, numPartitions=max(2, keys // 1_000_000))
    rows = ids.select(
        key_group_col(F.format_string("seed-%010d", "id"), d.pipeline.max_parallelism).alias("key_group"),
        F.format_string("seed-%010d", "id").alias("key"),
        F.lit("").alias("namespace"),
        F.lit(clock).cast("timestamp").alias("value"),
        F.lit(clock + stage.seen.ttl.ttl).cast("timestamp").alias("expires_at"),
        F.lit(-1).cast("long").alias("updated_epoch"),
    )
    rows.write.format("delta").mode("append").save(path)


def build(work: Path, landing: str, keys: int) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    runner = _runner(work, landing)
    with Stopwatch() as seeding:
        seed_dedupe(runner, keys)
    checkpoints = {}
    for epoch in (0, 1):
        report = runner.run_epoch(epoch, force_checkpoint=True)
        checkpoints[epoch] = report.checkpoint_id
    return {"keys": keys, "seed_s": seeding.elapsed, "checkpoints": checkpoints, "state_rows": report.state_rows,
            "state_bytes": report.state_bytes, "checkpoints_dir_bytes": dir_bytes(work / "checkpoints")}


def _timed(timings: dict[str, float], name: str, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            timings[name] = round(timings.get(name, 0.0) + time.monotonic() - started, 3)

    return wrapper


def _restore(runner, checkpoint_id: int) -> dict[str, Any]:
    import epochal.state.recovery.restore as state_restore

    timings: dict[str, float] = {}
    original = state_restore.restore_state
    state_restore.restore_state = _timed(timings, "restore_state_s", original)
    recovery = runner.recovery
    recovery._rewind_sinks = _timed(timings, "rewind_sinks_s", recovery._rewind_sinks)
    try:
        with Stopwatch() as watch:
            result = runner.restore(checkpoint_id)
    finally:
        state_restore.restore_state = original
        del recovery._rewind_sinks
    return {"restore_s": watch.elapsed, **timings, "epoch": result.epoch}


def measure(work: Path, landing: str, checkpoint_id: int, checkpoint_first: bool = False) -> dict[str, Any]:
    with Stopwatch() as setup:
        runner = _runner(work, landing)
    reset_jvm_peaks(runner.d.spark)
    warm = runner.run_epoch(2)  # warms the JVM and the caches; not counted
    restores = {"warm": _restore(runner, checkpoint_id)}
    durations = {"warm": warm.duration_s}
    for forced in ((True, False) if checkpoint_first else (False, True)):
        report = runner.run_epoch(2, force_checkpoint=forced)
        expected = "completed" if forced else "none"
        if report.checkpoint_status != expected:
            raise RuntimeError(f"epoch 2 ended with checkpoint status {report.checkpoint_status}, not {expected}")
        name = "with_checkpoint" if forced else "without_checkpoint"
        durations[name] = report.duration_s
        restores[name] = _restore(runner, checkpoint_id)
    return {
        "setup_s": setup.elapsed, "checkpoint_first": checkpoint_first,
        "epoch_without_checkpoint_s": durations["without_checkpoint"],
        "epoch_with_checkpoint_s": durations["with_checkpoint"], "warm_epoch_s": durations["warm"],
        "restores": [restores["without_checkpoint"], restores["with_checkpoint"]], "warm_restore": restores["warm"],
        "state_rows": report.state_rows, "memory": memory_report(runner.d.spark),
    }


def run_sizes(sizes: list[int], work: Path, repeats: int = 2, previous: Path | None = None) -> dict[str, Any]:
    """Every size: build the fixture once, then ``repeats`` measuring processes."""
    ds = Dataset(work / f"data-{EVENTS_PER_EPOCH}", EVENTS_PER_EPOCH, FIXTURE_EPOCHS)
    ds.ensure()
    results: dict[str, Any] = {}
    for keys in sizes:
        base = work / f"state-{keys}"
        fixture = run_child("bench.state_size", ["build", "--work", base, "--landing", ds.landing, "--keys", keys])
        checkpoint = fixture["checkpoints"]["1"]
        runs = [
            run_child("bench.state_size", ["measure", "--work", base, "--landing", ds.landing, "--checkpoint", checkpoint,
                                           *(["--checkpoint-first"] if i % 2 else [])])
            for i in range(repeats)
        ]
        restores = [r["restore_s"] for run in runs for r in run["restores"]]
        results[str(keys)] = {
            "fixture": fixture, "runs": runs,
            "restore_s": median(restores),
            "epoch_with_checkpoint_s": median([r["epoch_with_checkpoint_s"] for r in runs]),
            "epoch_without_checkpoint_s": median([r["epoch_without_checkpoint_s"] for r in runs]),
            "checkpoint_ratio": median([ratio(r["epoch_with_checkpoint_s"], r["epoch_without_checkpoint_s"]) for r in runs]),
            "memory": {k: median([r["memory"][k] for r in runs]) for k in runs[0]["memory"]},
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("build", "measure"))
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--landing", required=True)
    parser.add_argument("--keys", type=int)
    parser.add_argument("--checkpoint", type=int)
    parser.add_argument("--checkpoint-first", action="store_true", help="the epoch with a checkpoint runs first")
    args = parser.parse_args()
    if args.action == "build":
        emit(build(args.work, args.landing, args.keys))
    else:
        emit(measure(args.work, args.landing, args.checkpoint, args.checkpoint_first))


if __name__ == "__main__":
    main()
