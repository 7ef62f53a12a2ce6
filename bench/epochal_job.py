"""One process running clickstream epochs with epochal, as ``epochal run --to KEY`` would.

``python -m bench.epochal_job --config CFG --partitions P1,P2 [--variant full|core]``
builds the deployment (``epochal.pipeline.registry.build_deployment``), then for each
partition runs ``EpochRunner.run(to=P)``: the next epoch from where the state
is, with its checkpoint. Prints one JSON line: per epoch the wall time of
``run`` and the runner's report, the set-up time, and peak driver memory.

Variants: ``full`` is the clickstream example as shipped (parse, dedupe,
user totals, hourly revenue, sessions; five sinks); ``core`` is the same
stages and sinks as the Structured Streaming job (parse, dedupe, user totals,
hourly revenue; two sinks), so the two sides do the same work.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from bench.common import Stopwatch, deployment_config, emit, memory_report, reset_jvm_peaks

FULL, CORE = "clickstream", "clickstream_core"
VARIANTS = {"full": FULL, "core": CORE}


def build_core(settings):
    """The clickstream pipeline without sessions: the work the Structured Streaming job does."""
    from epochal.pipeline.dag import Pipeline
    from epochal.pipeline.examples.clickstream import stages as S
    from epochal.pipeline.examples.clickstream.options import ClickstreamOptions
    from epochal.pipeline.examples.clickstream.pipeline import SINKS
    from epochal.pipeline.sources import HourlyFolderSource

    events, distinct = f"{S.PARSE}.events", f"{S.DEDUPE}.distinct"
    return Pipeline(
        name=CORE,
        sources=[HourlyFolderSource(S.SOURCE, settings.landing)],
        stages=[
            S.ParseStage(S.PARSE, S.SOURCE),
            S.DedupeStage(settings.pipeline_options(ClickstreamOptions).dedupe_ttl, S.DEDUPE, events),
            S.UserTotalsStage(S.USERS, distinct),
            S.HourlyRevenueStage(S.HOURS, distinct),
        ],
        sinks=[s for s in SINKS if s.name in ("user_totals", "hourly_revenue")],
        max_parallelism=settings.spark.max_parallelism,
    )


def register() -> None:
    from epochal.pipeline.registry import PIPELINES

    PIPELINES[CORE] = build_core


def write_config(path: Path, *, variant: str, landing: str, work: Path, **checkpoints: Any) -> Path:
    """The YAML file of one clickstream benchmark deployment under ``work``."""
    return deployment_config(path, pipeline=VARIANTS[variant], landing=landing, work=work, **checkpoints)


def run(config: str, partitions: list[str]) -> dict[str, Any]:
    from epochal.config import load_settings
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    register()
    with Stopwatch() as setup:
        deployment = build_deployment(load_settings(config), lazy=True)
        runner = EpochRunner(deployment)
        runner.expect_run(to=partitions[-1])  # the whole run's length, as `epochal run --to` would (spark.jit)
    reset_jvm_peaks(deployment.spark)
    epochs = []
    for partition in partitions:
        started = time.monotonic()
        report = runner.run(to=partition)
        elapsed = round(time.monotonic() - started, 3)
        epochs.append({"partition": partition, "epoch_s": elapsed, "reports": [e.to_dict() for e in report.epochs]})
    return {"side": "epochal", "setup_s": setup.elapsed, "epochs": epochs, "memory": memory_report(deployment.spark)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--partitions", required=True, help="comma-separated partition keys, in order")
    args = parser.parse_args()
    emit(run(args.config, args.partitions.split(",")))


if __name__ == "__main__":
    main()
