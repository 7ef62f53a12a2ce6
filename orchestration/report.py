"""What an epoch reports to Dagster: each asset's metadata and the checkpoint's asset-check results."""

from __future__ import annotations

from typing import Any, Iterator

import dagster as dg

from epochal.orchestration.assets import CHECK_COMPLETE, CHECK_CONSISTENT, CHECKPOINT
from epochal.orchestration.metadata import checkpoint_metadata, sink_metadata, stage_metadata
from epochal.pipeline.checks import checkpoint_completeness, state_consistency
from epochal.state.errors import EpochalStateError

UNCHECKPOINTED = ("failed", "declined")


def asset_metadata(d, report, checkpoint_s: float | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each asset's metadata for one epoch (``checkpoint_s``: the checkpoint's duration, when already read)."""
    for stage in d.pipeline.ordered_stages:
        yield stage.name, stage_metadata(report, stage.name)
    for sink in d.pipeline.sinks:
        yield sink.name, sink_metadata(report, sink.name)
    yield CHECKPOINT, checkpoint_metadata(report, checkpoint_s if checkpoint_s is not None else checkpoint_duration(d, report))


def checkpoint_duration(d, report) -> float | None:
    """Seconds from the checkpoint's trigger to its end (its statistics), when it has an id."""
    if report.checkpoint_id is None:
        return None
    try:
        return d.coordinator.stats.get(report.checkpoint_id).duration_s
    except EpochalStateError:  # no statistics kept for it
        return None


def check_results(d, report, *, compare_upserts: bool = True) -> Iterator[dg.AssetCheckResult]:
    """The checkpoint's two checks after ``report``'s epoch (``compare_upserts``: see ``state_consistency``)."""
    yield _completeness(d, report)
    consistent = state_consistency(d, report.epoch, compare_upserts=compare_upserts)
    yield dg.AssetCheckResult(
        check_name=CHECK_CONSISTENT, asset_key=CHECKPOINT, passed=consistent.passed,
        description=consistent.description, metadata=consistent.metadata,
        severity=dg.AssetCheckSeverity.ERROR,
    )


def _completeness(d, report) -> dg.AssetCheckResult:
    """This epoch's checkpoint, if one was due; else (none due by interval) the latest completed one."""
    if report.checkpoint_status in UNCHECKPOINTED:
        name = "checkpoint" if report.checkpoint_id is None else f"checkpoint {report.checkpoint_id}"
        return dg.AssetCheckResult(
            check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=False, severity=dg.AssetCheckSeverity.ERROR,
            description=f"the {name} of epoch {report.epoch} ({report.partition}) {report.checkpoint_status}: "
                        f"{report.checkpoint_detail or 'no reason recorded'}",
            metadata={"checkpoint_status": report.checkpoint_status, "checkpoint_id": -1 if report.checkpoint_id is None else report.checkpoint_id},
        )
    latest = d.coordinator.store.latest()
    checkpointed = latest is not None and int(latest.metadata.epoch) == report.epoch
    complete = checkpoint_completeness(d, report.epoch if checkpointed else None)
    return dg.AssetCheckResult(
        check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=complete.passed,
        description=complete.description, metadata=complete.metadata, severity=dg.AssetCheckSeverity.ERROR,
    )
