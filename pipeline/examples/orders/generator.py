"""Deterministic, tiny landing data for the orders example.

``generate(landing, start, hours=3, seed=7)`` writes, for each UTC hour ``h``:

- ``<landing>/dt=YYYY-MM-DD/hour=HH/part-0000.jsonl``: orders, one JSON object a line,
  ``{"order_id", "customer", "item", "amount", "currency", "ts"}`` (``ts`` ISO-8601 in ``Z``),
  with event times inside the folder's hour;
- ``<landing>/rates/dt=YYYY-MM-DD/hour=HH/rates-0000.jsonl`` in hours 0 and 2 only:
  currency rates ``{"currency", "rate"}`` (to USD); the second file changes EUR.

Which customers order changes by hour, so some fall silent (event-time timers fire); the
third hour also holds one order delivered two hours late (older than the watermark) and
one in a currency no rate file ever prices (JPY). Amounts are multiples of 0.25 and rates
binary fractions, so every sum is exact in floating point (Spark's and Python's agree).

    python -m epochal.pipeline.examples.orders.generator LANDING [--hours 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone

import fsspec

from epochal.pipeline.examples.clickstream.layout import HOUR, hour_dir

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
ITEMS = ("apple", "bread", "cheese", "dates")
#: Who orders in each hour (cycled when there are more hours).
ACTIVE = (("ann", "bob", "cy", "dan"), ("bob", "cy", "eve"), ("cy", "dan", "eve"))
#: Rate files: hour -> {currency: rate to USD}.
RATES = {0: {"USD": 1.0, "EUR": 1.25, "GBP": 1.5}, 2: {"EUR": 1.0}}
ORDERS_PER_HOUR = 8


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def hour_orders(hour: int, start: datetime, rng: random.Random) -> list[dict]:
    """The orders delivered in hour ``hour`` (event times inside it, plus the special rows)."""
    base = start + hour * HOUR
    active = ACTIVE[hour % len(ACTIVE)]
    orders = []
    for n in range(ORDERS_PER_HOUR):
        orders.append({
            "order_id": f"o{hour:02d}{n:02d}",
            "customer": active[n % len(active)],
            "item": rng.choice(ITEMS),
            "amount": rng.randrange(1, 80) * 0.25,
            "currency": rng.choice(("USD", "USD", "EUR", "GBP")),
            "ts": _iso(base + timedelta(minutes=rng.randrange(0, 50), seconds=rng.randrange(0, 60))),
        })
    if hour == 1:  # a currency no rate file prices: reported, not counted in spend
        orders.append({"order_id": "o01-jpy", "customer": "eve", "item": "apple", "amount": 500.0,
                       "currency": "JPY", "ts": _iso(base + timedelta(minutes=55))})
    if hour == 2:  # delivered two hours late: older than the watermark at the start of this epoch
        orders.append({"order_id": "o02-late", "customer": "ann", "item": "cheese", "amount": 12.5,
                       "currency": "USD", "ts": _iso(base - 2 * HOUR + timedelta(minutes=40))})
    return orders


def generate(landing: str, start: datetime = START, hours: int = 3, seed: int = 7, rates_dir: str = "rates") -> None:
    """Write ``hours`` hours of orders and rate files under ``landing`` (a path or fsspec URL)."""
    rng = random.Random(seed)
    fs, root = fsspec.core.url_to_fs(landing)
    for hour in range(hours):
        moment = start + hour * HOUR
        folder = hour_dir(root, moment)
        fs.makedirs(folder, exist_ok=True)
        with fs.open(f"{folder}/part-0000.jsonl", "w") as out:
            out.writelines(json.dumps(o, sort_keys=True) + "\n" for o in hour_orders(hour, start, rng))
        if hour in RATES:
            folder = hour_dir(f"{root.rstrip('/')}/{rates_dir}", moment)
            fs.makedirs(folder, exist_ok=True)
            with fs.open(f"{folder}/rates-0000.jsonl", "w") as out:
                out.writelines(json.dumps({"currency": c, "rate": r}) + "\n" for c, r in sorted(RATES[hour].items()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("landing")
    parser.add_argument("--hours", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    generate(args.landing, hours=args.hours, seed=args.seed)


if __name__ == "__main__":
    main()
