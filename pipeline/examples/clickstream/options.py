"""The clickstream example's own options (the ``options:`` mapping of its configuration).

A pipeline validates its options with its own pydantic model, the way this one does::

    pipeline: clickstream
    options:
      dedupe_ttl: 7d
      session_gap: 30m
      allowed_lateness: 1h

``settings.pipeline_options(ClickstreamOptions)`` returns the validated model, or raises a
ConfigError naming ``options.<key>`` before any work starts.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from epochal.config.fields import NonNegativeDuration, PositiveDuration


class ClickstreamOptions(BaseModel):
    """The example clickstream pipeline: dedupe, sessions, watermark."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    dedupe_ttl: PositiveDuration = Field(
        default=timedelta(days=7), description="How long an event_id is remembered for deduplication."
    )
    session_gap: PositiveDuration = Field(
        default=timedelta(minutes=30), description="A gap longer than this between a user's events starts a new session."
    )
    allowed_lateness: NonNegativeDuration = Field(
        default=timedelta(hours=1), description="The watermark is the largest event time seen minus this."
    )
