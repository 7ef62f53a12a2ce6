"""Checks of a deployment's consistency (Dagster runs them as asset checks).

- :func:`checkpoint_completeness`: the latest completed checkpoint was acknowledged
  by every task of the pipeline (every stage and every sink), at one epoch, and
  holds a handle for every state every stage declares.
- :func:`state_consistency`: the sinks agree with the state: every UPSERT sink
  equals its stage's view of the state (compared in Spark, both directions, in one
  aggregation), and no APPEND sink holds rows of an epoch after the state's position
  (the files' statistics prove it without a Spark job when they can). An upsert sink whose
  stage has no ``view()`` (it is optional) cannot be compared: the result names it, and
  each sink it could not check, with why, and claims agreement only for those it checked.
  A run over several partitions compares its upsert sinks once, after its last partition
  (``compare_upserts=False`` before it): each comparison reads the whole sink and state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from epochal.pipeline.sinks import EPOCH_COLUMN
from epochal.pipeline.stage import SinkMode
from epochal.state.backends.values import normal_column
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


#: Why an upsert sink is not compared after a partition that is not its run's last (``compare_upserts=False``).
UPSERTS_AT_END = "compared once, after the last partition of this run"


def state_consistency(deployment, position: int | None, *, compare_upserts: bool = True) -> CheckOutcome:
    """The sinks agree with the state at ``position`` (the last epoch done). A sink that cannot be checked (no
    table yet, no epoch done, an upsert sink whose stage has no ``view()``) is named in the description and in
    the metadata (``<sink>_not_checked``: why), and the description claims only the sinks checked.

    ``compare_upserts=False`` leaves the upsert sinks to a later call (:data:`UPSERTS_AT_END`): a run over a
    range of partitions compares them after its last one, not after each (a comparison reads the whole sink and
    the whole state: a Spark aggregation that grows with them, 1.2 to 4 s a partition in a 24-partition
    backfill of the example whose epochs took 4.9 s, docs/performance.md). Append sinks are checked every time."""
    problems: list[str] = []
    details: dict[str, Any] = {}
    checked: list[str] = []
    skipped: dict[str, str] = {}
    for name, sink in deployment.sinks.items():
        why = _unchecked(deployment, sink, position, compare_upserts)
        if why is not None:
            skipped[name] = details[f"{name}_not_checked"] = why
            continue
        checked.append(name)
        problem = _sink_problem(deployment, name, sink, position, details)
        if problem:
            problems.append(problem)
    not_checked = "; ".join(f"{name} ({why})" for name, why in skipped.items())
    tail = f"; not checked: {not_checked}" if skipped else ""
    if problems:
        return CheckOutcome(False, "; ".join(problems) + tail, details)
    if not skipped:
        return CheckOutcome(True, "every sink agrees with the state", details)
    if not checked:
        return CheckOutcome(True, f"no sink could be checked against the state{tail}", details)
    return CheckOutcome(True, f"the sinks checked agree with the state: {', '.join(checked)}{tail}", details)


def _unchecked(d, sink, position: int | None, compare_upserts: bool = True) -> str | None:
    """Why ``sink`` cannot be checked against the state at ``position`` (None: it can be)."""
    if not delta_io.is_delta_table(sink.path):
        return f"no table at {sink.path} yet"
    if sink.spec.mode is SinkMode.APPEND:
        return None
    if not compare_upserts:
        return UPSERTS_AT_END
    if position is None:
        return "no epoch done yet: no state to compare it with"
    stage_name = sink.spec.input.partition(".")[0]
    if not hasattr(_stage(d, stage_name), "view"):
        return f"stage {stage_name!r} has no view()"
    return None


def _stage(d, name: str):
    return next(s for s in d.pipeline.stages if s.name == name)


def _sink_problem(d, name: str, sink, position: int | None, details: dict[str, Any]) -> str | None:
    """How ``sink`` disagrees with the state at ``position`` (None: it agrees); its counts go into ``details``."""
    if sink.spec.mode is SinkMode.APPEND:
        ahead = details[f"{name}_rows_ahead_of_state"] = 0 if position is None else _rows_ahead(sink, position)
        return f"sink {name} has rows of epochs after {position}" if ahead else None
    stage_name, _, output = sink.spec.input.partition(".")
    stage = _stage(d, stage_name)
    cols = [f.name for f in sink.spec.schema.fields]
    view = stage.view(d.context(stage, position), output or stage.outputs[0]).select(*cols)
    differing = details[f"{name}_rows_differing"] = _rows_differing(sink.read().select(*cols), view)
    return f"sink {name} differs from {stage_name}'s state in {differing} row(s)" if differing else None


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
    types = {f.name: f.dataType for f in stored.schema.fields}
    counts = both.groupBy(*[normal_column(F.col(c), types[c]).alias(c) for c in stored.columns]).agg(F.sum(side).alias(side))
    total = counts.agg(F.sum(F.abs(F.col(side)))).first()[0]
    return int(total or 0)
