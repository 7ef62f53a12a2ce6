"""Materialization metadata from an epoch's report: numbers the UI plots over time, and paths."""

from __future__ import annotations

from typing import Any

import dagster as dg

from epochal.pipeline.recovery import Restored


def _num(value: Any) -> dg.MetadataValue:
    return dg.MetadataValue.float(float(value)) if isinstance(value, float) else dg.MetadataValue.int(int(value))


def checkpoint_metadata(report, checkpoint_duration_s: float | None = None) -> dict[str, Any]:
    """The ``checkpoint`` asset: id, epoch, durations, state rows and bytes, bytes written, ``_metadata``.

    ``checkpoint_duration_s`` is the checkpoint's own time, trigger to end (from its statistics).
    """
    meta: dict[str, Any] = {
        "epoch": _num(report.epoch),
        "partition": dg.MetadataValue.text(report.partition),
        "epoch_duration_s": _num(float(report.duration_s)),
        "checkpoint_status": dg.MetadataValue.text(report.checkpoint_status),
    }
    if report.steps:
        meta["spark_jobs"] = _num(report.spark_jobs)
        meta["compiled_classes"] = _num(report.compiled_classes)
        meta["steps"] = dg.MetadataValue.md(steps_table(report.steps))
    if report.code:  # generated code or interpreted expressions (by the epoch's size, spark.codegen_min_mb)
        meta["code"] = dg.MetadataValue.text(report.code)
    if report.joins:  # joins by shuffle or Spark's broadcasts (by the epoch's size, spark.broadcast_join_min_mb)
        meta["joins"] = dg.MetadataValue.text(report.joins)
    if report.input_bytes is not None:
        meta["input_bytes"] = _num(report.input_bytes)
    if report.steps:  # Delta's version checksum files: written by a run's last epoch, for the next process
        meta["delta_checksums"] = dg.MetadataValue.text(str(report.checksums).lower())
    if report.checkpoint_id is not None:
        meta["checkpoint_id"] = _num(report.checkpoint_id)
    if checkpoint_duration_s is not None:
        meta["checkpoint_duration_s"] = _num(float(checkpoint_duration_s))
    if report.checkpoint_status == "completed":
        meta.update({
            "state_rows": _num(report.state_rows),
            "state_bytes": _num(report.state_bytes),
            "bytes_written": _num(report.bytes_written),
        })
    if report.checkpoint_detail:
        meta["checkpoint_detail"] = dg.MetadataValue.text(str(report.checkpoint_detail))
    if report.metadata_path:
        meta["metadata_path"] = dg.MetadataValue.path(report.metadata_path)
    return meta


def steps_table(steps: dict[str, dict[str, Any]]) -> str:
    """The epoch's steps as a markdown table: seconds, Spark jobs, classes compiled (``EpochReport.steps``)."""
    rows = [f"| {name} | {entry['s']:.3f} | {entry['jobs']} | {entry.get('compiled', '')} |" for name, entry in steps.items()]
    return "\n".join(["| step | seconds | Spark jobs | classes compiled |", "|---|---|---|---|", *rows])


def _timed(report, entry: dict[str, Any], step: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"epoch": _num(report.epoch)}
    if "duration_s" in entry:
        meta["duration_s"] = _num(float(entry["duration_s"]))
    if step in report.steps:
        meta["spark_jobs"] = _num(report.steps[step]["jobs"])
    return meta


def stage_metadata(report, stage: str) -> dict[str, Any]:
    """A stage's asset: its duration; when a checkpoint completed, its state's rows, bytes and tables."""
    entry = report.stages.get(stage, {})
    meta = _timed(report, entry, f"stage:{stage}")
    meta.update({key: _num(entry[key]) for key in ("state_rows", "state_bytes", "bytes_written") if key in entry})
    for state, path in sorted(entry.get("tables", {}).items()):
        meta[f"state_table/{state}"] = dg.MetadataValue.path(path)
    if report.checkpoint_id is not None:
        meta["checkpoint_id"] = _num(report.checkpoint_id)
    return meta


def sink_metadata(report, sink: str) -> dict[str, Any]:
    """A sink's asset: its duration, the rows this epoch wrote, its Delta table."""
    entry = report.sinks.get(sink, {})
    meta = _timed(report, entry, f"sink:{sink}")
    if "rows_written" in entry:
        meta["rows_written"] = _num(entry["rows_written"])
    if report.checkpoint_id is not None:
        meta["checkpoint_id"] = _num(report.checkpoint_id)
    if "table" in entry:
        meta["table"] = dg.MetadataValue.path(entry["table"])
    return meta


def restore_metadata(result: Restored, action: str) -> dict[str, Any]:
    """An observation recording a restore (or a reset to empty state) on the state's assets."""
    meta: dict[str, Any] = {"action": dg.MetadataValue.text(action)}
    if result.checkpoint_id is not None:
        meta["restored_checkpoint_id"] = _num(result.checkpoint_id)
    if result.epoch is not None:
        meta["restored_epoch"] = _num(result.epoch)
        meta["restored_partition"] = dg.MetadataValue.text(str(result.partition))
    else:
        meta["restored_epoch"] = dg.MetadataValue.text("empty state")
    if result.kind:
        meta["restored_kind"] = dg.MetadataValue.text(result.kind)
    if result.metadata_path:
        meta["metadata_path"] = dg.MetadataValue.path(result.metadata_path)
    if result.parallelism:
        meta["parallelism"] = _num(result.parallelism)
    if result.sinks_by_version:
        meta["sinks_restored_to_version"] = dg.MetadataValue.text(", ".join(result.sinks_by_version))
    if result.migrated:
        meta["migrated"] = dg.MetadataValue.text("; ".join(result.migrated))
    if result.dropped:
        meta["dropped"] = dg.MetadataValue.text(", ".join(result.dropped))
    return meta
