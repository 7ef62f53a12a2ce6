"""``epochal new NAME``: a starter pipeline package, the way ``dagster project scaffold`` or
``cargo new`` start a project.

It writes ``NAME/`` with a package (a stage that reads rows and rejects bad lines to a quarantine sink, one
with keyed state, and its own options), a
configuration naming it by import path, a test that runs it, and a ``pyproject.toml``
that also registers it under the entry-point group ``epochal.pipelines``.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from epochal.errors import EpochalError

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

PIPELINE = '''"""The {name} pipeline: JSON lines {{"key", "n"}} in hourly folders -> a running total per key.

Run it: ``epochal run --config epochal.yaml``; in Dagster: ``EPOCHAL_CONFIG=epochal.yaml epochal ui``.
"""

from pydantic import BaseModel, ConfigDict
from pyspark.sql import functions as F, types as T

import epochal

ROWS = T.StructType([T.StructField("key", T.StringType()), T.StructField("n", T.LongType())])
TOTALS = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])
REJECTED = T.StructType([T.StructField("raw", T.StringType()), T.StructField("reason", T.StringType())])
LINES = T.StructType([*ROWS.fields, T.StructField("_corrupt_record", T.StringType())])  # Spark's column for bad lines


class Options(BaseModel):
    """This pipeline's own options (``options:`` in the configuration)."""

    model_config = ConfigDict(extra="forbid")
    max_parallelism: int = 16


class ReadRows:
    """Stateless: the epoch's planned files -> rows, and the lines that are not rows -> rejected.

    A line that is not UTF-8, not JSON or of a wrong type (``"n": "x"``: Spark reads it as null, which would clear
    the key's total), or has no ``key`` or no ``n``, is rejected (to the quarantine sink): keyed state needs a key
    in every row, and nothing is lost. A rejected line is kept as valid UTF-8 (an invalid byte becomes U+FFFD), so
    that every Delta reader opens the sink."""

    name, inputs, outputs, keyed_state, operator_state = "read", ("landing",), ("rows", "rejected"), (), ()

    def process(self, ctx, inputs):
        files = list(inputs["landing"].files)  # fixed (and recorded) before the epoch reads anything
        if not files:
            return {{"rows": epochal.empty_frame(ctx.spark, ROWS), "rejected": epochal.empty_frame(ctx.spark, REJECTED)}}
        lines = ctx.spark.read.schema(LINES).json(files)
        bad = F.col("_corrupt_record")
        reason = (F.when(~F.is_valid_utf8(bad), "not UTF-8").when(bad.isNotNull(), "not JSON, or a wrong type")
                  .when(F.col("key").isNull(), "no key").when(F.col("n").isNull(), "no n"))
        raw = F.coalesce(F.make_valid_utf8(bad), F.to_json(F.struct("key", "n")))
        return {{
            "rows": lines.where(reason.isNull()).select("key", "n"),
            "rejected": lines.where(reason.isNotNull()).select(raw.alias("raw"), reason.alias("reason")),
        }}


class RunningTotals:
    """rows -> the new total of every key seen this epoch (keyed value state)."""

    TOTAL = epochal.ValueStateDescriptor("total", value_type=T.LongType())
    name, inputs, outputs, keyed_state, operator_state = "sum", ("read.rows",), ("totals",), (TOTAL,), ()

    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.sum("n").alias("n"))
        current = ctx.keyed.lookup(self.TOTAL, batch, "key")  # each key's total so far (pinned: read now)
        new = current.select("key", (F.coalesce(F.col("total"), F.lit(0)) + F.col("n")).alias("value"))
        ctx.keyed.update(self.TOTAL, new)  # one MERGE of the keys of this epoch
        return {{"totals": new.select("key", F.col("value").alias("total"))}}


def build(settings) -> epochal.Pipeline:
    options = settings.pipeline_options(Options)
    return epochal.Pipeline(
        name="{name}",
        sources=[epochal.HourlyFolderSource("landing", settings.landing)],
        stages=[ReadRows(), RunningTotals()],
        sinks=[
            epochal.SinkSpec("totals", "sum.totals", epochal.SinkMode.UPSERT, TOTALS, keys=("key",)),
            epochal.SinkSpec("quarantine", "read.rejected", epochal.SinkMode.APPEND, REJECTED),
        ],
        max_parallelism=options.max_parallelism,
    )
'''

CONFIG = """# epochal configuration of {name} (every key: epochal's docs/configuration.md).
pipeline: {name}.pipeline:build
landing: data/landing
warehouse: data/warehouse
checkpoints:
  dir: data/checkpoints
  retain: 3
  interval_epochs: 1
partitions:
  start: 2026-11-01T00:00:00Z
spark:
  master: local[2]
  parallelism: 2
  max_parallelism: 16
options:
  max_parallelism: 16
"""

TEST = '''"""Runs the {name} pipeline over two hours of input, as ``epochal run`` would."""

import json

import yaml

from epochal.config import load_settings
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner


def test_running_totals(tmp_path):
    for hour, rows in enumerate([[("a", 1), ("b", 2)], [("a", 10), (None, 5)]]):
        folder = tmp_path / "landing" / "dt=2026-11-01" / f"hour={{hour:02d}}"
        folder.mkdir(parents=True)
        lines = [json.dumps({{"key": k, "n": n}}) for k, n in rows] + (["not json", '{{"key": "a", "n": "x"}}'] if hour else [])
        latin1 = b"caf\\xe9\\n" if hour else b""  # a line that is not UTF-8
        (folder / "part-0000.jsonl").write_bytes("".join(line + "\\n" for line in lines).encode() + latin1)
    config = {{
        "pipeline": "{name}.pipeline:build",
        "landing": "landing",
        "partitions": {{"start": "2026-11-01T00:00:00Z"}},
        "spark": {{"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16}},
    }}
    (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
    runner = EpochRunner(build_deployment(load_settings(tmp_path / "epochal.yaml")))
    report = runner.run(to="2026-11-01-01:00")
    assert [e.checkpoint_status for e in report.epochs] == ["completed", "completed"]
    assert sorted(tuple(r) for r in runner.d.sinks["totals"].read().collect()) == [("a", 11), ("b", 2)]
    rejected = sorted((r["raw"], r["reason"]) for r in runner.d.sinks["quarantine"].read().collect())
    assert rejected == [("caf\\ufffd", "not UTF-8"), ("not json", "not JSON, or a wrong type"),
                        ('{{"key": "a", "n": "x"}}', "not JSON, or a wrong type"), ('{{"n":5}}', "no key")]  # kept, not lost
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["epochal"]

[project.optional-dependencies]
test = ["pytest"]

# `pipeline: {name}` names it once the package is installed.
[project.entry-points."epochal.pipelines"]
{name} = "{name}.pipeline:build"

[tool.setuptools]
packages = ["{name}"]
"""

README = """# {name}

An epochal pipeline. `{name}/pipeline.py` holds its stages; `epochal.yaml` runs it:

```sh
pip install -e '.[test]'      # or: export PYTHONPATH=$PWD
mkdir -p data/landing/dt=2026-11-01/hour=00
echo '{{"key": "a", "n": 1}}' > data/landing/dt=2026-11-01/hour=00/part-0000.jsonl
epochal run --to 2026-11-01-00:00 --config epochal.yaml    # one epoch: the hour 00:00-01:00 of 2026-11-01
epochal checkpoints list --config epochal.yaml
pytest
```

Input is JSON lines in hourly folders, `data/landing/dt=YYYY-MM-DD/hour=HH/*.jsonl`, one epoch per hour from
`partitions.start`. `epochal run` without `--to` runs every hour up to the last one that has ended, an empty
epoch for an hour without a folder: move `partitions.start` to where your data begins, before the first run (it
numbers the epochs, so a deployment that has run refuses another; delete `data/checkpoints` and `data/warehouse` to
start over).
"""


class ScaffoldError(EpochalError):
    """``epochal new`` cannot write the project (bad name, folder not empty)."""


def check_name(name: str) -> str:
    if not _IDENTIFIER.match(name) or keyword.iskeyword(name):
        raise ScaffoldError(
            f"cannot create a pipeline called {name!r}: use a Python package name "
            "(lower-case letters, digits and underscores, not starting with a digit)",
            action="choose another NAME, e.g. my_pipeline.",
        )
    return name


def scaffold(name: str, directory: str | Path | None = None) -> dict[str, object]:
    """Write the starter project for ``name`` into ``directory`` (default ``./NAME``)."""
    name = check_name(name)
    root = Path(directory if directory is not None else name).resolve()
    if root.exists() and any(root.iterdir()):
        raise ScaffoldError(f"{root} exists and is not empty", action="choose another --dir, or remove it.")
    files = {
        f"{name}/__init__.py": "",
        f"{name}/pipeline.py": PIPELINE.format(name=name),
        "epochal.yaml": CONFIG.format(name=name),
        "tests/test_pipeline.py": TEST.format(name=name),
        "pyproject.toml": PYPROJECT.format(name=name, dist=name.replace("_", "-")),
        "README.md": README.format(name=name),
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"name": name, "path": str(root), "files": sorted(files)}
