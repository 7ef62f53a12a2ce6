"""The orders example's own options (the ``options:`` mapping of its configuration)::

    pipeline: orders
    options:
      inactivity: 1h        # no order for this long (event time): an "inactive" alert
      allowed_lateness: 15m # watermark = end of the epoch's window minus this
      last_items: 3         # how many recent items the summary keeps per customer
      rates_dir: rates      # currency-rate files land under <landing>/<rates_dir>/dt=.../hour=...

``settings.pipeline_options(OrdersOptions)`` returns the validated model, or raises a
ConfigError naming ``options.<key>``.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from epochal.config.fields import NonNegativeDuration, PositiveDuration


class OrdersOptions(BaseModel):
    """The example orders pipeline: inactivity timers, watermark, recent items, rates folder."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    inactivity: PositiveDuration = Field(
        default=timedelta(hours=1), description="A customer with no order for this long (event time) gets an alert."
    )
    allowed_lateness: NonNegativeDuration = Field(
        default=timedelta(minutes=15), description="The watermark is the end of the epoch's window minus this."
    )
    last_items: int = Field(default=3, ge=1, le=100, description="Recent items kept per customer (list state).")
    rates_dir: str = Field(
        default="rates", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
        description="Folder under the landing root that receives currency-rate files, hourly like the orders.",
    )
