"""The clickstream pipeline (DESIGN.md section 5): its source, stages and sinks.

::

    landing -> parse -> dedupe -> aggregate_users  -> user_totals    (UPSERT on user_id)
                 |            |-> aggregate_hours  -> hourly_revenue (UPSERT on hour)
                 |            `-> sessionize       -> sessions, late_events (APPEND)
                 `-> quarantine (APPEND)

Sink names are the Delta tables of DESIGN.md (``<warehouse>/<name>``); since a
pipeline's sources, stages and sinks share one namespace, the stages feeding
them are named after what they do.
"""

from __future__ import annotations

from epochal.pipeline.examples.clickstream.options import ClickstreamOptions
from epochal.config import Settings
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.examples.clickstream.stages import (
    DEDUPE,
    HOURLY_REVENUE_SCHEMA,
    HOURS,
    LATE_EVENTS_SCHEMA,
    PARSE,
    QUARANTINE_SINK_SCHEMA,
    SESSIONIZE,
    SESSIONS_SCHEMA,
    SOURCE,
    USER_TOTALS_SCHEMA,
    USERS,
    DedupeStage,
    HourlyRevenueStage,
    ParseStage,
    SessionStage,
    UserTotalsStage,
)
from epochal.pipeline.sources import HourlyFolderSource
from epochal.pipeline.stage import SinkMode, SinkSpec

__all__ = [
    "HOURLY_REVENUE_SCHEMA",
    "LATE_EVENTS_SCHEMA",
    "PIPELINE_NAME",
    "QUARANTINE_SINK_SCHEMA",
    "SESSIONS_SCHEMA",
    "SINKS",
    "USER_TOTALS_SCHEMA",
    "build_pipeline",
]

PIPELINE_NAME = "clickstream"

#: Every sink of the pipeline (the runner adds ``epoch`` to APPEND sinks).
SINKS: tuple[SinkSpec, ...] = (
    SinkSpec("quarantine", f"{PARSE}.quarantine", SinkMode.APPEND, QUARANTINE_SINK_SCHEMA),
    SinkSpec("user_totals", f"{USERS}.user_totals", SinkMode.UPSERT, USER_TOTALS_SCHEMA, keys=("user_id",)),
    SinkSpec("hourly_revenue", f"{HOURS}.hourly_revenue", SinkMode.UPSERT, HOURLY_REVENUE_SCHEMA, keys=("hour",)),
    SinkSpec("sessions", f"{SESSIONIZE}.sessions", SinkMode.APPEND, SESSIONS_SCHEMA),
    SinkSpec("late_events", f"{SESSIONIZE}.late_events", SinkMode.APPEND, LATE_EVENTS_SCHEMA),
)


def build_pipeline(settings: Settings) -> Pipeline:
    """The clickstream pipeline for a deployment's settings (landing root, TTL, gap, lateness, max parallelism)."""
    cs = settings.pipeline_options(ClickstreamOptions)
    events, distinct = f"{PARSE}.events", f"{DEDUPE}.distinct"
    return Pipeline(
        name=PIPELINE_NAME,
        sources=[HourlyFolderSource(SOURCE, settings.landing)],
        stages=[
            ParseStage(PARSE, SOURCE),
            DedupeStage(cs.dedupe_ttl, DEDUPE, events),
            UserTotalsStage(USERS, distinct),
            HourlyRevenueStage(HOURS, distinct),
            SessionStage(cs.session_gap, cs.allowed_lateness, SESSIONIZE, distinct),
        ],
        sinks=list(SINKS),
        max_parallelism=settings.spark.max_parallelism,
    )
