"""The schedule (an epoch per closed window) and the savepoint sensor.

Neither starts Spark: they read the checkpoint storage (fsspec) only.

The schedule is Flink's CheckpointCoordinatorDeActivator in spirit: while the
pipeline is failed (the failure manager gave up) it triggers nothing and says
why in its skip reason, until a restore or a successful manual run clears the
failure. A scheduled run that starts while the pipeline is failed fails with the
reason (see ``epochal.orchestration.epoch``); a re-execution or retry of one is manual.

The savepoint sensor fires a ``savepoint`` run for three reasons, each with a
run key so that it never fires twice for the same reason:
a request (a file under ``<checkpoints>/requests/savepoint/``, whose name becomes
the savepoint's), every ``dagster.savepoint_every_checkpoints`` completed
checkpoints, and a change of the pipeline's code version.
"""


import json
import re
from datetime import datetime, timezone

import dagster as dg

from epochal.config import Granularity, Settings
from epochal.orchestration.resources import CheckpointStorageResource
from epochal.pipeline.partitions import Partitioning

CRON = {Granularity.HOURLY: "0 * * * *", Granularity.DAILY: "0 0 * * *"}


def failure_reason(checkpoints: CheckpointStorageResource) -> str | None:
    state = checkpoints.failure_state()
    if not state.failed:
        return None
    reasons = "; ".join(f.describe() for f in state.failures)
    return f"{state.consecutive} consecutive failed checkpoint(s): {reasons}"


def build_schedule(settings: Settings, job, name: str) -> dg.ScheduleDefinition:
    """Each interval, the latest closed window of the pipeline called ``name``."""
    partitioning = Partitioning.from_settings(settings.partitions)
    status = dg.DefaultScheduleStatus.RUNNING if settings.dagster.schedule_enabled else dg.DefaultScheduleStatus.STOPPED

    @dg.schedule(
        name=f"{name}_every_window", job=job, cron_schedule=CRON[settings.partitions.granularity],
        execution_timezone="UTC", default_status=status,
        description="Runs the epoch of the latest closed window; pauses while the pipeline is failed.",
    )
    def every_window(context: dg.ScheduleEvaluationContext, checkpoints: CheckpointStorageResource):
        reason = failure_reason(checkpoints)
        if reason is not None:
            return dg.SkipReason(
                f"pipeline {name} is failed ({reason}); no epoch is triggered until a "
                "restore (job 'restore') or a successful manual run"
            )
        now = context.scheduled_execution_time or datetime.now(timezone.utc)
        epoch = partitioning.latest_closed_epoch(now)
        key = None if epoch is None else partitioning.key(epoch)
        if key is None:
            return dg.SkipReason(f"no closed window yet (the first starts at {settings.partitions.start.isoformat()})")
        return dg.RunRequest(run_key=key, partition_key=key)

    return every_window


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _cursor(text: str | None) -> dict:
    return json.loads(text) if text else {"requests": [], "every_from": 0, "code_version": None}


def build_savepoint_sensor(settings: Settings, savepoint_job, version: str, name: str) -> dg.SensorDefinition:
    every = settings.dagster.savepoint_every_checkpoints

    @dg.sensor(
        name=f"{name}_savepoints", job=savepoint_job, minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Savepoints on request, every N completed checkpoints, and when the code version changes.",
    )
    def savepoints(context: dg.SensorEvaluationContext, checkpoints: CheckpointStorageResource):
        cursor = _cursor(context.cursor)
        completed = sorted(int(s.checkpoint_id) for s in checkpoints.stats() if s.status.value == "completed" and s.kind.value == "checkpoint")
        requests: list[dg.RunRequest] = []
        requests += _requested(cursor, checkpoints)
        if every and completed:
            newer = [c for c in completed if c > cursor["every_from"]]
            if len(newer) >= every:
                cursor["every_from"] = newer[-1]
                requests.append(_request(f"every:{newer[-1]}", f"every-{newer[-1]}", f"{every} checkpoints"))
        if cursor["code_version"] != version:
            if cursor["code_version"] is not None and completed:
                requests.append(_request(f"code:{version}", f"code-{version[:12]}", "code version changed"))
            cursor["code_version"] = version
        context.update_cursor(json.dumps(cursor))
        if not requests:
            return dg.SkipReason("no savepoint request, checkpoint count or code change")
        return requests

    return savepoints


def _requested(cursor: dict, checkpoints: CheckpointStorageResource) -> list[dg.RunRequest]:
    """A savepoint run for each request file not handled yet, or written anew since it was (the cursor keeps each
    file's time). Found from outside (probe 12, 2026-12-07): a request file written again was ignored for good,
    the sensor saying there was no request, and two files whose names clean up to the same savepoint name gave a
    run that failed on the name taken. The first request of a name makes ``request-<name>``; a name already
    taken (by a savepoint, or by a run requested before) gets the file's time after it."""
    handled: dict = cursor.setdefault("handled", {})
    taken = checkpoints.savepoint_names() | set(cursor.setdefault("names", []))
    runs = []
    for name, stamp in checkpoints.savepoint_requests().items():
        if name in cursor["requests"] and name not in handled:  # handled before the cursor kept the times
            handled[name] = stamp
        if handled.get(name) == stamp:
            continue
        base = f"request-{_SAFE.sub('-', name).replace('..', '-')}"[:100]
        if base in taken and stamp:
            base = f"{base}-{stamp}"
        savepoint, n = base, 1
        while savepoint in taken:
            n += 1
            savepoint = f"{base}-{n}"
        run_key = f"request:{name}" if name not in cursor["requests"] else f"request:{name}@{stamp}"
        if name not in cursor["requests"]:
            cursor["requests"].append(name)
        handled[name] = stamp
        taken.add(savepoint)
        cursor["names"].append(savepoint)
        runs.append(_request(run_key, savepoint, "request"))
    return runs


def _request(run_key: str, name: str, reason: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key, run_config={"ops": {"take_savepoint": {"config": {"name": name}}}},
        tags={"epochal/savepoint_reason": reason},
    )
