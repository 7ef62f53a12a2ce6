"""Part 2: bytes written by a checkpoint of a large keyed state, against the bytes of the changed rows.

``python -m bench.churn --work DIR --keys N --schedule 1,0.01,0.1,1 [--mode incremental|full]``
runs the synthetic churn pipeline (:mod:`bench.synthetic`) through the epoch
runner, one epoch per schedule entry, a checkpoint after each. Epoch 0 loads
every key; each later epoch changes the given fraction of them. Per epoch it
reports the checkpoint's ``bytes_written`` (what the coordinator records: the
data and deletion-vector files the state tables gained since the previous
checkpoint; for a full checkpoint, the copy), and the parquet bytes of the
changed rows alone, in the state table's row layout, written by Spark the
same way (the least a checkpoint could write).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from bench.common import deployment_config, dir_bytes, emit, median, ratio, run_child

DEFAULT_SCHEDULE = (1.0, 0.01, 0.1, 1.0)


def changed_row_bytes(spark, keys: int, fraction: float, epoch: int, max_parallelism: int, out: Path) -> int:
    """Parquet bytes of the rows epoch ``epoch`` changes, as state rows (key group, key, namespace, value...)."""
    from pyspark.sql import functions as F

    from bench.synthetic import changed_rows
    from epochal.state.keygroups import key_group_col

    rows = changed_rows(spark, keys, fraction, epoch).select(
        key_group_col("key", max_parallelism).alias("key_group"), "key", F.lit("").alias("namespace"), "value",
        F.lit(None).cast("timestamp").alias("expires_at"), F.lit(epoch).cast("long").alias("updated_epoch"),
    )
    shutil.rmtree(out, ignore_errors=True)
    rows.write.parquet(str(out))
    return sum(p.stat().st_size for p in out.glob("*.parquet"))


def run(work: Path, keys: int, schedule: list[float], mode: str) -> dict[str, Any]:
    from bench import synthetic
    from epochal.config import load_settings
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    synthetic.register(keys, schedule)
    config = deployment_config(work / "epochal.yaml", pipeline=synthetic.NAME, landing=str(work / "none"), work=work, mode=mode)
    settings = load_settings(config)
    # This part measures a MERGE's bytes (deletion vectors, rows of the changed keys): the 1M-key state is above
    # the rewrite threshold anyway (spark.state_rewrite_below_mb), the smaller ones of a quick run are not.
    settings = settings.model_copy(update={"spark": settings.spark.model_copy(update={"state_rewrite_below_mb": 0})})
    runner = EpochRunner(build_deployment(settings))
    epochs = []
    for epoch, fraction in enumerate(schedule):
        started = time.monotonic()
        report = runner.run_epoch(epoch)
        elapsed = round(time.monotonic() - started, 3)
        rows_bytes = changed_row_bytes(
            runner.d.spark, keys, fraction, epoch, settings.spark.max_parallelism, work / "changed" / str(epoch)
        )
        epochs.append({
            "epoch": epoch, "fraction": fraction, "epoch_s": elapsed, "checkpoint": report.checkpoint_status,
            "bytes_written": report.bytes_written, "state_bytes": report.state_bytes, "state_rows": report.state_rows,
            "changed_row_bytes": rows_bytes, "ratio": ratio(report.bytes_written, rows_bytes),
        })
    return {"keys": keys, "mode": mode, "epochs": epochs, "checkpoints_dir_bytes": dir_bytes(work / "checkpoints")}


def measure(work: Path, keys: int, schedule=DEFAULT_SCHEDULE, repeats: int = 1) -> dict[str, Any]:
    """Incremental checkpoints at each churn of ``schedule`` (``repeats`` runs), and one full checkpoint."""
    runs = []
    for i in range(repeats):
        shutil.rmtree(work / f"incremental-{i}", ignore_errors=True)
        runs.append(run_child("bench.churn", ["--work", work / f"incremental-{i}", "--keys", keys,
                                              "--schedule", ",".join(map(str, schedule)), "--mode", "incremental"]))
    shutil.rmtree(work / "full", ignore_errors=True)
    full = run_child("bench.churn", ["--work", work / "full", "--keys", keys, "--schedule", "1,0.01", "--mode", "full"])
    return summarize(runs, full)


def summarize(runs: list[dict[str, Any]], full: dict[str, Any]) -> dict[str, Any]:
    """Medians per churn over incremental ``runs`` (epoch 0, the initial load, left out) and the full checkpoint."""
    schedule = [e["fraction"] for e in runs[0]["epochs"]]
    by_fraction: dict[str, dict[str, Any]] = {}
    for index, fraction in enumerate(schedule[1:], start=1):
        rows = [r["epochs"][index] for r in runs]
        by_fraction[f"{fraction:g}"] = {
            key: median([r[key] for r in rows]) for key in ("bytes_written", "changed_row_bytes", "ratio", "epoch_s")
        }
    full_epoch = full["epochs"][1]
    return {
        "keys": runs[0]["keys"], "schedule": schedule, "runs": runs, "full_run": full, "incremental": by_fraction,
        "full": {k: full_epoch[k] for k in ("fraction", "bytes_written", "changed_row_bytes", "ratio", "epoch_s")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--keys", required=True, type=int)
    parser.add_argument("--schedule", default=",".join(map(str, DEFAULT_SCHEDULE)))
    parser.add_argument("--mode", default="incremental", choices=("incremental", "full"))
    args = parser.parse_args()
    emit(run(args.work, args.keys, [float(x) for x in args.schedule.split(",")], args.mode))


if __name__ == "__main__":
    main()
