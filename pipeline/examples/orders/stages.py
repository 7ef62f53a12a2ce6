"""The stages of the orders example, each a short class named after its Flink counterpart.

::

    orders, rates -> price -> customers -> customer_summary (UPSERT on customer)
                          `-> activity  -> alerts           (APPEND)

- ``price``: Flink's broadcast state pattern (a ``BroadcastProcessFunction``): the
  currency rates are broadcast operator state, the same map on every subtask; a new
  rate file updates it, and every order is priced in USD with the map as it stands
  after this epoch's rate file.
- ``customers``: keyed state, set-oriented (whole epochs at once, in the JVM): a
  ``ReducingState`` (total spend), an ``AggregatingState`` (average order, a
  sum-and-count accumulator), a ``ListState`` (the last items) and a ``MapState``
  (spend per item).
- ``activity``: a ``KeyedProcessFunction`` run per customer with an event-time
  ``TimerService``: every order moves the customer's timer to ``last order +
  inactivity``; when the watermark passes it, ``on_timer`` emits an ``inactive`` alert.

The watermark is the event time every order is assumed to have arrived by: the end of
the epoch's window minus ``allowed_lateness`` (deterministic on replay). An order older
than the watermark at the start of its epoch is late: it is reported and kept away from
the timers, and still counts in the customer's spend.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal import (
    AggregatingStateDescriptor,
    BroadcastState,
    EventTimeTimers,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
    empty_frame,
    run_keyed_process,
)

_STR, _DOUBLE, _LONG, _TS = T.StringType(), T.DoubleType(), T.LongType(), T.TimestampType()


def schema(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, dtype, True) for name, dtype in fields])


ORDER = schema(("order_id", _STR), ("customer", _STR), ("item", _STR), ("amount", _DOUBLE), ("currency", _STR), ("ts", _TS))
RATE = schema(("currency", _STR), ("rate", _DOUBLE))
PRICED = schema(*[(f.name, f.dataType) for f in ORDER.fields], ("amount_usd", _DOUBLE))
SUMMARY = schema(
    ("customer", _STR), ("orders", _LONG), ("total_spend", _DOUBLE), ("avg_order", _DOUBLE),
    ("last_items", T.ArrayType(_STR)), ("favourite_item", _STR),
)
ALERT = schema(("customer", _STR), ("kind", _STR), ("at", _TS), ("order_id", _STR))


def _read_json(ctx, files, schema_: T.StructType) -> DataFrame:
    """The epoch's planned files (fixed and recorded before the epoch reads anything) as rows."""
    files = list(files)
    return ctx.spark.read.schema(schema_).json(files) if files else empty_frame(ctx.spark, schema_)


# ----------------------------------------------------------------------------- price: broadcast state

class PriceStage:
    """``orders``, ``rates`` -> ``priced``: each order with ``amount_usd`` (null: no rate for its currency).

    State ``rates``: broadcast operator state (Flink ``getBroadcastState``), currency -> rate.
    """

    RATES = BroadcastState("rates", key_type=_STR, value_type=_DOUBLE)

    outputs, keyed_state, operator_state = ("priced",), (), (RATES,)

    def __init__(self, name: str = "price", orders: str = "orders", rates: str = "rates") -> None:
        self.name, self.inputs = name, (orders, rates)

    def process(self, ctx, inputs):
        orders_in, rates_in = inputs[self.inputs[0]], inputs[self.inputs[1]]
        state = ctx.operator.get_broadcast_state(self.RATES)
        # Every subtask holds the same copy; subtask 0's is the map (read pinned at this call).
        rates = state.get().where("subtask = 0").select(F.col("map_key").alias("currency"), F.col("value").alias("rate"))
        if rates_in.files:  # Flink's processBroadcastElement: a new rate file updates the map
            files = _read_json(ctx, rates_in.files, RATE).select("*", F.col("_metadata.file_path").alias("file"))
            new = files.groupBy("currency").agg(F.max_by("rate", "file").alias("rate"))  # the last file wins
            rates = rates.join(new, "currency", "left_anti").unionByName(new)
            state.update(rates.select(F.col("currency").alias("map_key"), F.col("rate").alias("value")))
        orders = _read_json(ctx, orders_in.files, ORDER)
        priced = orders.join(F.broadcast(rates), "currency", "left")  # processElement: read-only access
        return {"priced": priced.select(*ORDER.names, (F.col("amount") * F.col("rate")).alias("amount_usd"))}


# ----------------------------------------------------------------------------- customers: set-oriented keyed state

def _add(a: Column, b: Column) -> Column:
    return a + b


ACC = schema(("sum", _DOUBLE), ("orders", _LONG))


class CustomersStage:
    """``price.priced`` -> ``summary``: the full summary row of every customer with a priced order this epoch.

    Keyed by customer, written set-oriented (one MERGE per state and epoch):

    - ``total_spend``: ``ReducingState`` of ``amount_usd`` with ``+``;
    - ``order_stats``: ``AggregatingState`` (Flink's ``AggregateFunction``): accumulator
      ``(sum, orders)``, result the average order;
    - ``last_items``: ``ListState`` of the last ``n`` items, oldest first;
    - ``spend_per_item``: ``MapState`` item -> spend.

    :meth:`view` is the whole ``summary`` from the state (the upsert sink is rebuilt from it on restore).
    """

    TOTAL_SPEND = ReducingStateDescriptor("total_spend", value_type=_DOUBLE, reduce=_add, py_reduce=lambda a, b: a + b)
    ORDER_STATS = AggregatingStateDescriptor(
        "order_stats", input_type=_DOUBLE, acc_type=ACC, result_type=_DOUBLE,
        create=lambda: F.struct(F.lit(0.0).alias("sum"), F.lit(0).cast("long").alias("orders")),
        add=lambda acc, x: F.struct((acc["sum"] + x).alias("sum"), (acc["orders"] + 1).alias("orders")),
        result=lambda acc: acc["sum"] / acc["orders"],
    )
    LAST_ITEMS = ListStateDescriptor("last_items", element_type=_STR)
    SPEND_PER_ITEM = MapStateDescriptor("spend_per_item", user_key_type=_STR, value_type=_DOUBLE)

    outputs, operator_state = ("summary",), ()
    keyed_state = (TOTAL_SPEND, ORDER_STATS, LAST_ITEMS, SPEND_PER_ITEM)

    def __init__(self, last_items: int, name: str = "customers", input: str = "price.priced") -> None:
        self.n, self.name, self.inputs = last_items, name, (input,)

    def process(self, ctx, inputs):
        orders = inputs[self.inputs[0]].where(F.col("amount_usd").isNotNull())
        spend = orders.select(F.col("customer").alias("key"), F.col("amount_usd").alias("value"))
        ctx.keyed.add(self.TOTAL_SPEND, spend)  # ReducingState.add, per key: reduce(old, v1, v2, ...)
        ctx.keyed.add(self.ORDER_STATS, spend)  # AggregatingState.add: add(acc, v) from create()

        # ListState: the last n items, in event-time order (then order id) within an epoch.
        recent = orders.groupBy("customer").agg(
            F.sort_array(F.collect_list(F.struct("ts", "order_id", "item")))["item"].alias("new")
        )
        items = F.concat(F.coalesce(F.col(self.LAST_ITEMS.name), F.array().cast("array<string>")), F.col("new"))
        last_n = F.slice(items, F.greatest(F.size(items) - self.n + 1, F.lit(1)), self.n)
        with_old = ctx.keyed.lookup(self.LAST_ITEMS, recent, "customer")  # the batch + each key's list so far
        ctx.keyed.update(self.LAST_ITEMS, with_old.select(F.col("customer").alias("key"), last_n.alias("value")))

        # MapState: put the new spend of each (customer, item) touched this epoch.
        spent = orders.groupBy("customer", "item").agg(F.sum("amount_usd").alias("spent"))
        before = ctx.keyed.values(self.SPEND_PER_ITEM).select(
            F.col("key").alias("customer"), F.explode("value").alias("item", "before")
        )
        entries = spent.join(before, ["customer", "item"], "left").select(
            F.col("customer").alias("key"), F.col("item").alias("map_key"),
            (F.coalesce("before", F.lit(0.0)) + F.col("spent")).alias("map_value"),
        )
        ctx.keyed.put(self.SPEND_PER_ITEM, entries)

        # The state is written: a read now sees it. The summary rows of the customers of this epoch.
        return {"summary": self.view(ctx).join(orders.select("customer").distinct(), "customer", "left_semi")}

    def view(self, ctx, output: str = "summary") -> DataFrame:
        def by_customer(descriptor, *columns):
            return ctx.keyed.read(descriptor).select(F.col("key").alias("customer"), *columns)

        # The favourite item: the largest spend (ties: the first name), from the map's entries.
        ranked = F.sort_array(F.transform(F.map_entries("value"), lambda e: F.struct(-e["value"], e["key"].alias("item"))))
        stats = by_customer(self.ORDER_STATS, F.col("value.orders").alias("orders"),
                            self.ORDER_STATS.result(F.col("value")).alias("avg_order"))
        return (
            stats.join(by_customer(self.TOTAL_SPEND, F.col("value").alias("total_spend")), "customer")
            .join(by_customer(self.LAST_ITEMS, F.col("value").alias("last_items")), "customer", "left")
            .join(by_customer(self.SPEND_PER_ITEM, ranked[0]["item"].alias("favourite_item")), "customer", "left")
            .select(*SUMMARY.names)
        )


# ----------------------------------------------------------------------------- activity: per-key function, timers

LAST_ORDER = ValueStateDescriptor("last_order", value_type=_TS)


class Inactivity:
    """Flink's ``KeyedProcessFunction`` per customer: one event-time timer at ``last order + gap``.

    Runs in a Python worker per customer; timestamps are naive UTC (as Spark hands them to pandas).
    """

    def __init__(self, gap: timedelta) -> None:
        self.gap = gap

    def process(self, key, records, ctx):
        last, timers = ctx.value(LAST_ORDER), ctx.timer_service()
        newest = max([records["ts"].max().to_pydatetime()] + ([last.value()] if last.value() else []))
        if last.value() is not None:
            timers.delete_event_time_timer(last.value() + self.gap)
        timers.register_event_time_timer(newest + self.gap)
        last.update(newest)
        return []

    def on_timer(self, timestamp, key, ctx):
        ctx.value(LAST_ORDER).clear()  # the customer starts afresh with its next order
        yield {"customer": key, "kind": "inactive", "at": timestamp, "order_id": None}


class ActivityStage:
    """``price.priced`` -> ``alerts``: ``inactive`` (a timer fired), ``late_order``, ``unpriced_order``.

    State: ``last_order`` (``ValueState``) and ``timers`` (event-time timers, keyed state too).
    """

    TIMERS = EventTimeTimers.declare("timers")

    outputs, operator_state = ("alerts",), ()
    keyed_state = (LAST_ORDER, TIMERS.descriptor)

    def __init__(self, inactivity: timedelta, allowed_lateness: timedelta, name: str = "activity",
                 input: str = "price.priced") -> None:
        self.inactivity, self.lateness, self.name, self.inputs = inactivity, allowed_lateness, name, (input,)

    def process(self, ctx, inputs):
        orders = inputs[self.inputs[0]]
        watermark_before = ctx.info.window_start - self.lateness  # where the last epoch left it
        watermark = ctx.info.window_end - self.lateness  # this epoch's: timers at or before it fire
        late = F.col("ts") < F.lit(watermark_before)
        fired = run_keyed_process(
            ctx.keyed, orders.where(~late).select("customer", "ts"), "customer", [LAST_ORDER],
            Inactivity(self.inactivity), ALERT, timers=self.TIMERS, watermark=watermark,
        )
        reported = orders.where(late | F.col("amount_usd").isNull()).select(
            "customer", F.when(late, "late_order").otherwise("unpriced_order").alias("kind"),
            F.col("ts").alias("at"), "order_id",
        )
        return {"alerts": fired.unionByName(reported)}
