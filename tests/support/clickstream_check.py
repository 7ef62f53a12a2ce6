"""Compare the clickstream sinks with the pure-Python reference (shared by the end-to-end tests)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from epochal.pipeline.examples.clickstream import reference as ref


def _frame(spark, path: Path, columns: list[str]) -> pd.DataFrame:
    df = spark.read.format("delta").load(str(path)).select(*columns).toPandas()
    return df.sort_values(columns).reset_index(drop=True)


def _same(actual: pd.DataFrame, expected: pd.DataFrame, name: str) -> None:
    assert len(actual) == len(expected), f"{name}: {len(actual)} rows, expected {len(expected)}"
    for column in expected.columns:
        a, e = actual[column].tolist(), expected[column].tolist()
        if column == "revenue" or column == "amount":
            assert all((x is None and y is None) or (x == x and y == y and math.isclose(x, y, rel_tol=1e-9)) or (x != x and y != y) for x, y in zip(a, e)), name
        elif pd.api.types.is_datetime64_any_dtype(expected[column]):
            assert [pd.Timestamp(x).tz_localize("UTC") if pd.Timestamp(x).tzinfo is None else pd.Timestamp(x) for x in a] == [pd.Timestamp(x) for x in e], f"{name}.{column}"
        else:
            assert a == e, f"{name}.{column}"


def check_sinks(spark, config: Path, partitions: list[str]) -> None:
    settings = yaml.safe_load(config.read_text())
    expected = ref.expected_sinks(settings["landing"], partitions)
    warehouse = Path(settings["warehouse"])
    for name in ("user_totals", "hourly_revenue", "sessions", "late_events", "quarantine"):
        exp = expected[name]
        stored = set(spark.read.format("delta").load(str(warehouse / name)).columns)
        columns = [c for c in exp.columns if c in stored]  # late_events keeps no source_file
        exp = exp[columns]
        exp = exp.sort_values(columns).reset_index(drop=True)
        _same(_frame(spark, warehouse / name, columns), exp, name)
