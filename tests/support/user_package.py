"""A user's own pipeline package, written outside the repository and put on the import path
(``sys.path`` for this process, ``PYTHONPATH`` for the ``epochal`` processes a test starts)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def on_import_path(site: Path, package: str, modules: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Write ``site/<package>/<module>.py`` for each of ``modules`` (name -> source) and make it importable;
    forget the package's modules afterwards, so that the next test writes its own."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    for name, source in modules.items():
        (site / package / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p))
    try:
        yield site
    finally:
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]


# The README's reading stage, as a module a user's package holds (``<package>/rows.py``).
ROWS_MODULE = '''
from pyspark.sql import types as T

ROWS = T.StructType([T.StructField("key", T.StringType()), T.StructField("n", T.LongType())])
TOTALS = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])


class ReadRows:
    """Stateless: the epoch's planned files -> rows."""

    name, inputs, outputs, keyed_state, operator_state = "read", ("landing",), ("rows",), (), ()

    def process(self, ctx, inputs):
        files = list(inputs["landing"].files)
        return {"rows": ctx.spark.read.schema(ROWS).json(files) if files else ctx.spark.createDataFrame([], ROWS)}
'''


# The README's running totals: a stateful stage and an upsert sink (``<package>/totals.py``).
TOTALS_MODULE = '''
from pyspark.sql import functions as F, types as T

from epochal import HourlyFolderSource, Pipeline, SinkMode, SinkSpec, ValueStateDescriptor

from .rows import TOTALS, ReadRows


class RunningTotals:
    TOTAL = ValueStateDescriptor("total", value_type=T.LongType())
    name, inputs, outputs, keyed_state, operator_state = "sum", ("read.rows",), ("totals",), (TOTAL,), ()

    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.sum("n").alias("n"))
        current = ctx.keyed.lookup(self.TOTAL, batch, "key")
        new = current.select("key", (F.coalesce(F.col("total"), F.lit(0)) + F.col("n")).alias("value"))
        ctx.keyed.update(self.TOTAL, new)
        return {"totals": new.select("key", F.col("value").alias("total"))}


def build(settings):
    return Pipeline(
        name="totals",
        sources=[HourlyFolderSource("landing", settings.landing)],
        stages=[ReadRows(), RunningTotals()],
        sinks=[SinkSpec("totals", "sum.totals", SinkMode.UPSERT, TOTALS, keys=("key",))],
        max_parallelism=16,
    )
'''
#: Three epochs that leave a=111, b=7.
EPOCHS = [[("a", 1), ("b", 2)], [("a", 10)], [("a", 100), ("b", 5)]]


def write_landing(root: Path, epochs: list[list[tuple[str, int]]]) -> None:
    """JSON lines ``{"key", "n"}`` under ``root/landing``, one hourly folder per epoch from 2026-11-01 00:00."""
    for hour, rows in enumerate(epochs):
        folder = root / "landing" / "dt=2026-11-01" / f"hour={hour:02d}"
        folder.mkdir(parents=True)
        (folder / "part-0000.jsonl").write_text("".join(json.dumps({"key": k, "n": n}) + "\n" for k, n in rows))
