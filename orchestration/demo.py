"""``epochal demo``: sample landing data, a few epochs, a savepoint, a summary.

Runs with the embedded defaults: local Spark, local files under one folder
(a temporary one unless ``--dir`` is given), and an ephemeral Dagster instance:
each epoch is a run of the epoch job for its partition, the savepoint a run of
the ``savepoint`` job, all in this process with one SparkSession.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEMO_START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def demo_settings(root: Path) -> dict[str, Any]:
    return {
        "landing": str(root / "landing"),
        "warehouse": str(root / "warehouse"),
        "checkpoints": {"dir": str(root / "checkpoints"), "retain": 2},
        "partitions": {"start": DEMO_START.isoformat()},
        # Every run of the demo shares this process's JVM, and the first is one partition of several: tiered
        # compilation, as spark.jit: auto would choose for the whole (76 s against 80 s, README.md).
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "jit": "tiered"},
    }


def _epoch_summary(result) -> dict[str, Any]:
    (event,) = [e for e in result.get_asset_materialization_events()
                if e.event_specific_data.materialization.asset_key.to_user_string() == "checkpoint"]
    meta = {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}
    checks = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data.passed
              for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    return {**meta, "run_id": result.run_id, "checks": checks}


def run_demo(directory: str | None = None, *, hours: int = 4) -> dict[str, Any]:
    import dagster as dg
    import yaml

    from epochal.config import load_settings
    from epochal.orchestration.definitions import build_definitions, epoch_job_name
    from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
    from epochal.pipeline.partitions import Partitioning
    from epochal.pipeline.registry import build_deployment, build_pipeline

    root = Path(directory or tempfile.mkdtemp(prefix="epochal-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "epochal.yaml"
    config.write_text(yaml.safe_dump(demo_settings(root)))
    settings = load_settings(config)
    say = lambda text: print(f"[demo] {text}", file=sys.stderr, flush=True)  # noqa: E731
    manifest = generate(settings.landing, DEMO_START, hours, GeneratorConfig(users=12, events_per_hour=60, seed=7))
    say(f"sample landing data: {hours} hours under {settings.landing}")
    defs = build_definitions(settings, str(config))
    partitioning = Partitioning.from_settings(settings.partitions)
    epochs = []
    with dg.DagsterInstance.ephemeral() as instance:
        job = defs.resolve_job_def(epoch_job_name(build_pipeline(settings).name))
        for epoch in range(hours):
            result = job.execute_in_process(partition_key=partitioning.key(epoch), instance=instance)
            summary = _epoch_summary(result)
            epochs.append(summary)
            say(f"epoch {summary['epoch']} {summary['partition']}: {summary['epoch_duration_s']:.1f}s, "
                f"checkpoint {summary.get('checkpoint_id')} {summary['checkpoint_status']}, checks {summary['checks']}")
        saved = defs.resolve_job_def("savepoint").execute_in_process(
            instance=instance, run_config={"ops": {"take_savepoint": {"config": {"name": "demo"}}}})
        savepoint = saved.output_for_node("take_savepoint")
    say(f"savepoint: {savepoint['path']}")
    deployment = build_deployment(settings)
    sinks = {name: sink.read().count() for name, sink in deployment.sinks.items()}
    top = deployment.sinks["user_totals"].read().orderBy("revenue", ascending=False).limit(3).collect()
    checkpoints = [
        {"id": int(c.checkpoint_id), "epoch": int(c.metadata.epoch), "kind": c.metadata.kind.value}
        for c in deployment.coordinator.store.all()
    ]
    summary = {
        "dir": str(root),
        "config": str(config),
        "generated": manifest.to_dict() if hasattr(manifest, "to_dict") else None,
        "epochs": epochs,
        "sink_rows": sinks,
        "top_users": [{"user_id": r.user_id, "revenue": r.revenue, "events": r.events} for r in top],
        "checkpoints": checkpoints,
        "savepoint": savepoint["path"],
    }
    say("sink rows: " + ", ".join(f"{k}={v}" for k, v in sinks.items()))
    say("checkpoints: " + ", ".join(f"{c['kind']} {c['id']} (epoch {c['epoch']})" for c in checkpoints))
    say(f"explore it in the Dagster UI: epochal ui --config {config}")
    return summary
