"""The correctness check of the comparison: both sides' ``user_totals`` and ``hourly_revenue`` are equal.

``python -m bench.verify --expected WAREHOUSE --actual WAREHOUSE [--actual ...]``
compares, in Spark, each table of every ``--actual`` warehouse with the
``--expected`` one: a full outer join on the key; a row differs when it is
missing on one side, a count differs, a time differs, or revenue differs by
more than 1e-6 relative (floating-point sums in another order). Prints one
JSON line: per warehouse and table, rows on each side and rows that differ
(with up to 5 examples).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.common import emit, spark_settings

TABLES = {
    "user_totals": ("user_id", ("events", "purchases", "first_event_time", "last_event_time"), ("revenue",)),
    "hourly_revenue": ("hour", ("purchases",), ("revenue",)),
}
TOLERANCE = 1e-6


def compare_table(spark, expected: str, actual: str, table: str) -> dict[str, Any]:
    """Rows of ``table`` in both warehouses, and the rows that differ."""
    from pyspark.sql import functions as F

    key, exact, approx = TABLES[table]
    a = spark.read.format("delta").load(f"{expected}/{table}").alias("a")
    b = spark.read.format("delta").load(f"{actual}/{table}").alias("b")
    joined = a.join(b, F.col(f"a.{key}") == F.col(f"b.{key}"), "full_outer")
    differs = F.col(f"a.{key}").isNull() | F.col(f"b.{key}").isNull()
    for column in exact:
        differs = differs | ~F.col(f"a.{column}").eqNullSafe(F.col(f"b.{column}"))
    for column in approx:
        x, y = F.col(f"a.{column}"), F.col(f"b.{column}")
        differs = differs | (F.abs(x - y) > F.lit(TOLERANCE) * F.greatest(F.abs(x), F.abs(y), F.lit(1.0)))
    bad = joined.where(F.coalesce(differs, F.lit(True)))
    examples = [r.asDict() for r in bad.limit(5).collect()]
    return {
        "rows_expected": a.count(),
        "rows_actual": b.count(),
        "differing": bad.count(),
        "examples": [{k: str(v) for k, v in e.items()} for e in examples],
    }


def verify(spark, expected: str, actuals: list[str]) -> dict[str, Any]:
    report = {a: {t: compare_table(spark, expected, a, t) for t in TABLES} for a in actuals}
    ok = all(r["differing"] == 0 and r["rows_expected"] > 0 for tables in report.values() for r in tables.values())
    return {"expected": expected, "tables": report, "equal": ok}


def main() -> None:
    from epochal.state.session import build_spark_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expected", required=True)
    parser.add_argument("--actual", action="append", required=True)
    args = parser.parse_args()
    spark = build_spark_session(spark_settings(), app_name="epochal-bench-verify")
    emit(verify(spark, str(Path(args.expected)), [str(Path(a)) for a in args.actual]))


if __name__ == "__main__":
    main()
