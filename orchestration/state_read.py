"""``epochal state read``: the rows of one state table, and what they are (Flink's State Processor API, read side).

Without a checkpoint it reads the working table, the state as the last run left it (after a run that died, also
writes no checkpoint completed: said in ``read.unfinished``); with one, the table's version that checkpoint
recorded. A table on a local or S3 location is read by delta-rs in this process: no JVM starts; elsewhere Spark
reads it.
"""

from __future__ import annotations

from typing import Any

from epochal.errors import EpochalError


class NoSuchStateError(EpochalError):
    """The state named has no table where it is read; the message says which states the pipeline declares."""


class StateReadError(EpochalError):
    """A state table's version could not be read (its files gone or damaged)."""


def read_state(d, stage: str, state: str, checkpoint_id: str | None, limit: int | None) -> dict[str, Any]:
    """``{"stage", "state", "read": what was read, "rows"}`` of deployment ``d``'s ``stage/state``."""
    from epochal.state.delta import io as delta_io
    from epochal.state.delta.objectstore import delta_rs_reaches
    from epochal.state.delta.paths import resolve_handle_path, to_spark
    from epochal.state.delta.rows import read_rows

    if checkpoint_id:
        checkpoint = d.coordinator.resolve(checkpoint_id)
        handle = checkpoint.metadata.handle(stage, state)
        if handle is None:
            raise _no_state(d.pipeline, stage, state, f"in checkpoint {checkpoint_id}")
        path, version = resolve_handle_path(handle, checkpoint.metadata_path), handle.version
        source = {"checkpoint": int(checkpoint.checkpoint_id), "epoch": int(checkpoint.metadata.epoch), "version": version}
    else:
        path, version = to_spark(d.storage.shared_dir(stage, state)), None
        if not delta_io.is_delta_table(path):
            raise _no_state(d.pipeline, stage, state, f"at {path}")
        source = _working_table_source(d)
    try:
        if delta_rs_reaches(path):
            rows = read_rows(path, version, limit)
        else:
            df = delta_io.read_version(d.spark, path, version)
            rows = [r.asDict(recursive=True) for r in (df.limit(limit) if limit else df).toLocalIterator()]
    except EpochalError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs's or Spark's own error (a data file gone): named, in one line
        from epochal.state.errors import one_line

        at = "" if version is None else f" at version {version}"
        raise StateReadError(
            f"state {stage}/{state}: its table {path}{at} cannot be read: {one_line(exc)}",
            action="its files may be missing or damaged: read another checkpoint (`epochal checkpoints list`), "
                   "or restore one, which checks its files first",
            stage=stage, state=state, table=path, version=version,
        ) from exc
    return {"stage": stage, "state": state, "read": source, "rows": rows}


def _working_table_source(d) -> dict[str, Any]:
    """What the working table holds: the state after the last finished epoch, or after a run that died also the
    writes of the epoch it left (not checkpointed: the next run restores the latest checkpoint and redoes it)."""
    progress = d.progress.load()
    source: dict[str, Any] = {"checkpoint": None, "epoch": progress.last_done_epoch}
    if not progress.clean:
        what = "a restore" if progress.restoring is not None else f"epoch {progress.in_progress}"
        source["unfinished"] = (
            f"the last run did not finish {what}: "
            "this table may hold writes no checkpoint completed, which the next run or restore rolls back "
            "(--checkpoint ID reads a completed checkpoint)")
    return source


def _no_state(pipeline, stage: str, state: str, where: str) -> NoSuchStateError:
    """No table for ``stage/state`` ``where``: the error says which states the pipeline declares (one kept by a
    removed stage is still read while its table is there)."""
    declared = {s.name: [d.name for d in (*s.keyed_state, *s.operator_state)] for s in pipeline.ordered_stages}
    if stage not in declared:
        with_state = ", ".join(f"{n} ({', '.join(v)})" for n, v in declared.items() if v)
        return NoSuchStateError(f"no state {stage}/{state} {where}, and pipeline {pipeline.name!r} has no stage {stage!r}; "
                                f"its stages with state: {with_state or 'none'}")
    return NoSuchStateError(
        f"no state {stage}/{state} {where}; stage {stage!r} declares: {', '.join(declared[stage]) or 'no state'}")
