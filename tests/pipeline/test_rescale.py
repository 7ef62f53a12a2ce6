"""Rescale is real: ``restore --parallelism P`` changes the parallelism the pipeline runs with from then on
(recorded with the run position and with every later checkpoint's state), operator state is redistributed
once, and union list state read through ``run_subtask_process`` does not grow with epochs or parallelism.

The pipeline is a user's package outside the repository: a stage keeps, per subtask, the largest ``n``
it has seen (union list state, Flink's way of keeping a source's offsets or a watermark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from epochal.config import load_settings
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from tests.support.user_package import ROWS_MODULE, on_import_path, write_landing

LARGEST_MODULE = '''
from pyspark.sql import functions as F, types as T

from epochal import HourlyFolderSource, Pipeline, SinkMode, SinkSpec, UnionListOperatorState, run_subtask_process

from .rows import ReadRows

LARGEST = T.StructType([T.StructField("subtask", T.IntegerType()), T.StructField("largest", T.LongType())])


class KeepLargest:
    """Per subtask: the largest n seen so far, one element of a union list."""

    def process(self, subtask, records, state):
        kept = state.list(Largest.SEEN)
        largest = max([*kept, *records["n"].tolist()])
        kept[:] = [largest]
        yield {"subtask": subtask, "largest": largest}


class Largest:
    SEEN = UnionListOperatorState("seen", value_type=T.LongType())
    name, inputs, outputs, keyed_state, operator_state = "largest", ("read.rows",), ("largest",), (), (SEEN,)

    def initialize_state(self, context):
        context.operator_state_store.get_union_list_state(self.SEEN)

    def process(self, ctx, inputs):
        out = run_subtask_process(ctx.operator, inputs["read.rows"].select("n"), [self.SEEN], KeepLargest(), LARGEST)
        return {"largest": out}


def build(settings):
    return Pipeline(
        name="largest",
        sources=[HourlyFolderSource("landing", settings.landing)],
        stages=[ReadRows(), Largest()],
        sinks=[SinkSpec("largest_by_subtask", "largest.largest", SinkMode.APPEND, LARGEST)],
        max_parallelism=16,
    )
'''
# Nine rows an epoch: every subtask of up to three gets some (a round-robin repartition).
EPOCHS = [[(f"k{i}", 10 * e + i) for i in range(9)] for e in range(7)]


def _partition(epoch: int) -> str:
    return f"2026-11-01-{epoch:02d}:00"


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    with on_import_path(tmp_path / "site", "acme", {"rows": ROWS_MODULE, "largest": LARGEST_MODULE}, monkeypatch):
        write_landing(tmp_path, EPOCHS)
        config = {
            "pipeline": "acme.largest:build",
            "landing": "landing",
            "partitions": {"start": "2026-11-01T00:00:00Z"},
            "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
            "checkpoints": {"interval_epochs": 1, "retain": 2},
        }
        (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
        yield tmp_path


def _seen(runner: EpochRunner):
    stage = runner.d.pipeline.ordered_stages[-1]
    return runner.d.operator[stage.name].read_raw(stage.SEEN)


def _check(runner: EpochRunner, parallelism: int, last_epoch: int) -> None:
    """One element per subtask, written at ``parallelism``; the largest of them the largest n so far."""
    seen = _seen(runner)
    rows = seen.groupBy("subtask", "parallelism").agg(F.count(F.lit(1)).alias("n")).orderBy("subtask")
    assert [tuple(r) for r in rows.collect()] == [(i, parallelism, 1) for i in range(parallelism)]
    assert seen.agg(F.max("value")).first()[0] == max(n for _, n in EPOCHS[last_epoch])
    latest = runner.d.coordinator.store.latest().metadata
    assert (int(latest.epoch), latest.parallelism) == (last_epoch, parallelism)


@pytest.mark.slow
def test_rescale_2_3_1_redistributes_union_state_once_and_keeps_the_new_parallelism(spark, project):
    config = project / "epochal.yaml"
    runner = EpochRunner(build_deployment(load_settings(config), spark))
    runner.run(to=_partition(2))
    _check(runner, 2, 2)  # three epochs at 2: still one element per subtask, not 2**3

    epochal = str(Path(sys.executable).with_name("epochal"))
    restored = subprocess.run([epochal, "restore", "--parallelism", "3", "--config", str(config), "--json"],
                              capture_output=True, text=True, timeout=900, cwd=project)
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert json.loads(restored.stdout)["parallelism"] == 3

    runner = EpochRunner(build_deployment(load_settings(config), spark))  # a later run, same config file
    assert runner.d.parallelism == 3
    runner.run(to=_partition(4))
    _check(runner, 3, 4)

    runner.restore(parallelism=1)
    runner.run(to=_partition(6))
    _check(runner, 1, 6)
    assert EpochRunner(build_deployment(load_settings(config), spark)).d.parallelism == 1

    sink = runner.d.sinks["largest_by_subtask"].read()
    per_epoch = {r.epoch: r.subtasks for r in sink.groupBy("epoch").agg(F.count(F.lit(1)).alias("subtasks")).collect()}
    assert per_epoch == {0: 2, 1: 2, 2: 2, 3: 3, 4: 3, 5: 1, 6: 1}
