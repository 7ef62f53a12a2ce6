"""Spark per-batch aggregates of the clickstream example (the stateless parts).

Each function takes one epoch's *distinct* events (the events schema of
:mod:`parse`, after dedupe) and returns the batch's contribution to a sink;
the merge into the sink (an upsert on the natural key) is done by the sink
writer, with the rules of ``merge_*`` below:

- ``user_totals`` (key ``user_id``): ``events``, ``purchases``, ``revenue`` add
  up; ``first_event_time`` takes the min, ``last_event_time`` the max.
- ``hourly_revenue`` (key ``hour``): ``purchases`` and ``revenue`` add up.

Hours are UTC whatever the session time zone. Revenue is the sum of purchase
amounts (0.0 when there is none); views and carts have a null amount.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

MICROS_PER_HOUR = 3_600_000_000


def utc_hour(ts: Column) -> Column:
    """The start of the UTC hour holding ``ts`` (independent of ``spark.sql.session.timeZone``)."""
    micros = F.unix_micros(ts)
    return F.timestamp_micros(micros - F.pmod(micros, F.lit(MICROS_PER_HOUR)))


def _purchase_aggregates() -> list[Column]:
    purchase = F.col("event_type") == "purchase"
    return [
        F.count_if(purchase).cast("long").alias("purchases"),
        F.coalesce(F.sum(F.when(purchase, F.col("amount"))), F.lit(0.0)).alias("revenue"),
    ]


def hourly_revenue_delta(distinct_events: DataFrame) -> DataFrame:
    """Per UTC event hour with a distinct event in the batch: ``hour``, ``purchases``, ``revenue``."""
    return distinct_events.groupBy(utc_hour(F.col("event_time")).alias("hour")).agg(*_purchase_aggregates())


def user_totals_delta(distinct_events: DataFrame) -> DataFrame:
    """Per user in the batch: ``user_id``, ``events``, ``purchases``, ``revenue``, ``first_event_time``, ``last_event_time``."""
    return distinct_events.groupBy("user_id").agg(
        F.count(F.lit(1)).cast("long").alias("events"),
        *_purchase_aggregates(),
        F.min("event_time").alias("first_event_time"),
        F.max("event_time").alias("last_event_time"),
    )


def _sum(name: str) -> Column:
    return (F.coalesce(F.col(f"a.{name}"), F.lit(0)) + F.coalesce(F.col(f"b.{name}"), F.lit(0))).alias(name)


def merge_user_totals(current: DataFrame, delta: DataFrame) -> DataFrame:
    """``current`` user totals with a batch's ``delta`` folded in (a full outer join on ``user_id``)."""
    joined = current.alias("a").join(delta.alias("b"), on="user_id", how="full_outer")
    return joined.select(
        "user_id",
        _sum("events"),
        _sum("purchases"),
        _sum("revenue"),
        F.least("a.first_event_time", "b.first_event_time").alias("first_event_time"),
        F.greatest("a.last_event_time", "b.last_event_time").alias("last_event_time"),
    )


def merge_hourly_revenue(current: DataFrame, delta: DataFrame) -> DataFrame:
    """``current`` hourly revenue with a batch's ``delta`` folded in (a full outer join on ``hour``)."""
    joined = current.alias("a").join(delta.alias("b"), on="hour", how="full_outer")
    return joined.select("hour", _sum("purchases"), _sum("revenue"))
