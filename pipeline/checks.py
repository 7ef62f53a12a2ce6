"""Checks of a deployment's consistency (Dagster runs them as asset checks).

- :func:`checkpoint_completeness`: the latest completed checkpoint was acknowledged
  by every task of the pipeline (every stage and every sink), at one epoch, and
  holds a handle for every state every stage declares.
- :func:`state_consistency`: the sinks agree with the state: every UPSERT sink
  equals its stage's view of the state (compared in Spark, both directions, in one
  aggregation), and no APPEND sink holds rows of an epoch after the state's position
  (the files' statistics prove it without a Spark job when they can).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from epochal.pipeline.sinks import EPOCH_COLUMN
from epochal.pipeline.stage import SinkMode
from epochal.state.delta import io as delta_io


@dataclass
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def checkpoint_completeness(deployment, epoch: int | None = None) -> CheckOutcome:
    """The latest completed checkpoint (optionally: it must be at ``epoch``) is complete."""
    latest = deployment.coordinator.store.latest()
    if latest is None:
        return CheckOutcome(epoch is None, "no completed checkpoint yet", {"checkpoint_id": -1})
    meta = latest.metadata
    problems: list[str] = []
    if epoch is not None and int(meta.epoch) != epoch:
        problems.append(f"latest checkpoint {int(latest.checkpoint_id)} is at epoch {int(meta.epoch)}, expected {epoch}")
    expected = set(deployment.pipeline.tasks)
    acked = {a.task for a in meta.acks}
    if meta.kind.value == "savepoint" and not meta.sinks:  # taken before savepoints recorded the sinks' versions
        expected = {t for t in expected if t.startswith("stage:")}
    if acked != expected:
        missing, extra = sorted(expected - acked), sorted(acked - expected)
        problems.append(f"acks missing {missing}" + (f", unexpected {extra}" if extra else ""))
    declared = {
        (stage.name, d.name)
        for stage in deployment.pipeline.stages
        for d in list(stage.keyed_state) + list(stage.operator_state)
    }
    held = {(h.stage, h.state) for h in meta.handles}
    if declared - held:
        problems.append(f"no handle for {sorted('/'.join(p) for p in declared - held)}")
    details = {
        "checkpoint_id": int(latest.checkpoint_id),
        "epoch": int(meta.epoch),
        "tasks_acked": len(acked),
        "tasks_expected": len(expected),
        "handles": len(meta.handles),
    }
    if problems:
        return CheckOutcome(False, "; ".join(problems), details)
    return CheckOutcome(True, f"checkpoint {int(latest.checkpoint_id)}: all {len(expected)} tasks acked epoch {int(meta.epoch)}", details)


def state_consistency(deployment, position: int | None) -> CheckOutcome:
    """The sinks agree with the state at ``position`` (the last epoch done)."""
    d = deployment
    problems: list[str] = []
    details: dict[str, Any] = {}
    producers = {s.name: s for s in d.pipeline.stages}
    for name, sink in d.sinks.items():
        if not delta_io.is_delta_table(sink.path):
            continue
        if sink.spec.mode is SinkMode.APPEND:
            ahead = 0 if position is None else _rows_ahead(sink, position)
            details[f"{name}_rows_ahead_of_state"] = ahead
            if ahead:
                problems.append(f"sink {name} has rows of epochs after {position}")
            continue
        stage_name, _, output = sink.spec.input.partition(".")
        stage = producers[stage_name]
        if position is None or not hasattr(stage, "view"):
            continue
        cols = [f.name for f in sink.spec.schema.fields]
        view = stage.view(d.context(stage, position), output or stage.outputs[0]).select(*cols)
        differing = _rows_differing(sink.read().select(*cols), view)
        details[f"{name}_rows_differing"] = differing
        if differing:
            problems.append(f"sink {name} differs from {stage_name}'s state in {differing} row(s)")
    if problems:
        return CheckOutcome(False, "; ".join(problems), details)
    return CheckOutcome(True, "every sink agrees with the state", details)


def _rows_ahead(sink, position: int) -> int:
    """0 or 1: whether the append sink holds a row of an epoch after ``position``. The files' statistics answer
    without a Spark job when they prove there is none (the usual case); otherwise a Spark job looks."""
    if not delta_io.may_hold_above(sink.path, EPOCH_COLUMN, position):
        return 0
    return sink.read().where(F.col(EPOCH_COLUMN) > F.lit(position)).limit(1).count()


def _rows_differing(stored: DataFrame, view: DataFrame) -> int:
    """Rows in one and not the other, counted with multiplicity (``exceptAll`` both ways), in one aggregation:
    each distinct row's count in ``stored`` minus its count in ``view``."""
    side = "__epochal_side"
    both = stored.withColumn(side, F.lit(1)).unionByName(view.withColumn(side, F.lit(-1)))
    counts = both.groupBy(*stored.columns).agg(F.sum(side).alias(side))
    total = counts.agg(F.sum(F.abs(F.col(side)))).first()[0]
    return int(total or 0)
