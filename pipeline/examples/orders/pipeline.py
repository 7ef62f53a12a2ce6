"""The orders pipeline: ``build_pipeline(settings)`` (``pipeline: orders``).

::

    orders (<landing>/dt=.../hour=...)   -> price -> customers -> customer_summary (UPSERT on customer)
    rates  (<landing>/rates/dt=.../...)  -'      `-> activity  -> alerts           (APPEND)
"""

from __future__ import annotations

from epochal import HourlyFolderSource, Pipeline, SinkMode, SinkSpec
from epochal.pipeline.examples.orders.options import OrdersOptions
from epochal.pipeline.examples.orders.stages import ALERT, SUMMARY, ActivityStage, CustomersStage, PriceStage

PIPELINE_NAME = "orders"

SINKS = (
    SinkSpec("customer_summary", "customers.summary", SinkMode.UPSERT, SUMMARY, keys=("customer",)),
    SinkSpec("alerts", "activity.alerts", SinkMode.APPEND, ALERT),
)


def build_pipeline(settings) -> Pipeline:
    """The orders pipeline for a deployment's settings (its options: :class:`OrdersOptions`)."""
    options = settings.pipeline_options(OrdersOptions)
    landing = settings.landing.rstrip("/")
    return Pipeline(
        name=PIPELINE_NAME,
        sources=[HourlyFolderSource("orders", landing), HourlyFolderSource("rates", f"{landing}/{options.rates_dir}")],
        stages=[
            PriceStage(),
            CustomersStage(options.last_items),
            ActivityStage(options.inactivity, options.allowed_lateness),
        ],
        sinks=list(SINKS),
        max_parallelism=settings.spark.max_parallelism,
    )
