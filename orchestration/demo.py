"""``epochal demo``: sample landing data, a few epochs, a savepoint, a summary.

Runs with the embedded defaults: local Spark, local files under one folder
(a temporary one unless ``--dir`` is given).
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DEMO_START = datetime(2026, 11, 1, tzinfo=timezone.utc)


def demo_settings(root: Path):
    from config import Settings

    return Settings.model_validate(
        {
            "landing": str(root / "landing"),
            "warehouse": str(root / "warehouse"),
            "checkpoints": {"dir": str(root / "checkpoints"), "retain": 2},
            "partitions": {"start": DEMO_START.isoformat()},
            "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2},
        }
    )


def run_demo(directory: str | None = None, *, hours: int = 4) -> dict[str, Any]:
    from pipeline.examples.clickstream.generator import GeneratorConfig, generate
    from pipeline.partitions import Partitioning
    from pipeline.registry import build_deployment
    from pipeline.runner import EpochRunner

    root = Path(directory or tempfile.mkdtemp(prefix="epochal-demo-")).resolve()
    settings = demo_settings(root)
    say = lambda text: print(f"[demo] {text}", file=sys.stderr, flush=True)  # noqa: E731
    manifest = generate(settings.landing, DEMO_START, hours, GeneratorConfig(users=12, events_per_hour=60, seed=7))
    say(f"sample landing data: {hours} hours under {settings.landing}")
    runner = EpochRunner(build_deployment(settings))
    last = Partitioning.from_settings(settings.partitions).key(hours - 1)
    report = runner.run(to=last)
    for e in report.epochs:
        say(f"epoch {e.epoch} {e.partition}: {e.duration_s:.1f}s, checkpoint {e.checkpoint_id} {e.checkpoint_status}")
    savepoint = runner.savepoint("demo")
    say(f"savepoint: {savepoint['path']}")
    sinks = {name: sink.read().count() for name, sink in runner.d.sinks.items()}
    top = runner.d.sinks["user_totals"].read().orderBy("revenue", ascending=False).limit(3).collect()
    checkpoints = [
        {"id": int(c.checkpoint_id), "epoch": int(c.metadata.epoch), "kind": c.metadata.kind.value}
        for c in runner.d.coordinator.store.all()
    ]
    summary = {
        "dir": str(root),
        "generated": manifest.to_dict() if hasattr(manifest, "to_dict") else None,
        "epochs": [e.to_dict() for e in report.epochs],
        "sink_rows": sinks,
        "top_users": [{"user_id": r.user_id, "revenue": r.revenue, "events": r.events} for r in top],
        "checkpoints": checkpoints,
        "savepoint": savepoint["path"],
    }
    say("sink rows: " + ", ".join(f"{k}={v}" for k, v in sinks.items()))
    say("checkpoints: " + ", ".join(f"{c['kind']} {c['id']} (epoch {c['epoch']})" for c in checkpoints))
    return summary
