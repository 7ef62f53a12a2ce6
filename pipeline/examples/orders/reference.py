"""The orders pipeline again, in plain Python: every sink and every state, from the landing files.

The tests' oracle. It reads what the generator wrote (not the generator's own rows) and follows
the rules the stages' docstrings state, without Spark: rates merged per hour (the last file
wins), late = older than the watermark at the start of the epoch, timers at ``last order +
inactivity`` fired after the epoch's orders when ``timer <= end of window - allowed_lateness``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

import fsspec

from epochal.pipeline.examples.clickstream.layout import HOUR, hour_dir
from epochal.pipeline.examples.orders.options import OrdersOptions


def _lines(fs, folder: str) -> list[dict]:
    rows = []
    for path in sorted(fs.glob(f"{folder}/*.jsonl")):
        with fs.open(path, "r") as handle:
            rows += [json.loads(line) for line in handle if line.strip()]
    return rows


def _ts(text: str) -> datetime:
    """ISO-8601 with offset -> naive UTC (as Spark hands timestamps to Python)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)


@dataclass
class Expected:
    rates: dict[str, float] = field(default_factory=dict)
    total_spend: dict[str, float] = field(default_factory=dict)
    order_stats: dict[str, tuple[float, int]] = field(default_factory=dict)  # (sum, orders)
    last_items: dict[str, list[str]] = field(default_factory=dict)
    spend_per_item: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    last_order: dict[str, datetime] = field(default_factory=dict)
    timers: dict[str, datetime] = field(default_factory=dict)
    alerts: list[tuple] = field(default_factory=list)  # (epoch, customer, kind, at, order_id)

    def summary(self) -> dict[str, tuple]:
        """customer -> (orders, total_spend, avg_order, last_items, favourite_item)."""
        out = {}
        for customer, (total, orders) in self.order_stats.items():
            spend = self.spend_per_item.get(customer, {})
            favourite = min(spend.items(), key=lambda kv: (-kv[1], kv[0]))[0] if spend else None
            out[customer] = (orders, self.total_spend[customer], total / orders, self.last_items.get(customer), favourite)
        return out


def expected(landing: str, start: datetime, epochs: int, options: OrdersOptions = OrdersOptions()) -> Expected:
    """Every sink and state after ``epochs`` hourly epochs from ``start``."""
    fs, root = fsspec.core.url_to_fs(landing)
    start = start.astimezone(timezone.utc).replace(tzinfo=None)
    exp = Expected()
    for epoch in range(epochs):
        window_start = start + epoch * HOUR
        exp.rates.update({r["currency"]: r["rate"] for r in _lines(fs, hour_dir(f"{root}/{options.rates_dir}", window_start))})
        orders = _lines(fs, hour_dir(root, window_start))
        for o in orders:
            o["ts"] = _ts(o["ts"])
            rate = exp.rates.get(o["currency"])
            o["usd"] = None if rate is None else o["amount"] * rate
        _customers(exp, [o for o in orders if o["usd"] is not None], options.last_items)
        _activity(exp, epoch, orders, window_start, options)
    return exp


def _customers(exp: Expected, priced: list[dict], n: int) -> None:
    for o in priced:
        c = o["customer"]
        exp.total_spend[c] = exp.total_spend.get(c, 0.0) + o["usd"]
        total, count = exp.order_stats.get(c, (0.0, 0))
        exp.order_stats[c] = (total + o["usd"], count + 1)
    new_spend: dict[tuple[str, str], float] = defaultdict(float)
    for o in sorted(priced, key=lambda o: (o["ts"], o["order_id"])):
        exp.last_items[o["customer"]] = (exp.last_items.get(o["customer"], []) + [o["item"]])[-n:]
        new_spend[(o["customer"], o["item"])] += o["usd"]
    for (c, item), spent in new_spend.items():
        exp.spend_per_item[c][item] = exp.spend_per_item[c].get(item, 0.0) + spent


def _activity(exp: Expected, epoch: int, orders: list[dict], window_start: datetime, options: OrdersOptions) -> None:
    watermark_before = window_start - options.allowed_lateness
    watermark = window_start + HOUR - options.allowed_lateness
    for o in orders:
        if o["ts"] < watermark_before:
            exp.alerts.append((epoch, o["customer"], "late_order", o["ts"], o["order_id"]))
        elif o["usd"] is None:
            exp.alerts.append((epoch, o["customer"], "unpriced_order", o["ts"], o["order_id"]))
    on_time: dict[str, datetime] = {}
    for o in orders:
        if o["ts"] >= watermark_before:
            on_time[o["customer"]] = max(o["ts"], on_time.get(o["customer"], o["ts"]))
    for customer, newest in on_time.items():
        last = max(newest, exp.last_order.get(customer, newest))
        exp.last_order[customer] = last
        exp.timers[customer] = last + options.inactivity
    for customer, due in sorted(exp.timers.items()):
        if due <= watermark:
            exp.alerts.append((epoch, customer, "inactive", due, None))
            del exp.timers[customer]
            del exp.last_order[customer]
