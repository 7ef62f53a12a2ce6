"""``epochal verify`` on a user's own pipeline, from outside the repository, through the console script.

A deterministic pipeline (the README's running totals) passes every scenario over three partitions
(one named crash point and no random instant, to stay fast); the same pipeline with ``F.rand()`` in its
values fails, and the failure names the non-determinism, the stage and the sink. Neither touches the
user's own warehouse or checkpoints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from epochal.config import Jit, load_settings
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.partitions import Partitioning
from epochal.pipeline.verify.engine import DEFAULT_PARTITIONS, RANDOM_ATTEMPTS, Verifier, _range
from epochal.pipeline.verify.report import Outcome, ScenarioResult
from tests.support.user_package import EPOCHS, ROWS_MODULE, TOTALS_MODULE, on_import_path, write_landing

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
# The running totals with a random number in every value: two straight runs never agree.
RANDOM_TOTALS_MODULE = TOTALS_MODULE.replace(
    '+ F.col("n")).alias("value")', '+ F.col("n") + (F.rand() * 1000).cast("long")).alias("value")'
)
assert "F.rand()" in RANDOM_TOTALS_MODULE
# The running totals and Flink's per-subtask counter: each subtask's count of rows in list (operator) state.
# After the savepoint's restore at another parallelism the counts are split over the new subtasks and summed
# again by the stage, so the state differs from the straight run's while the sinks do not. And a stage whose
# upsert sink has a MAP column (probe 3 found every write of one failing).
COUNTED_MODULE = '''
from pyspark.sql import functions as F, types as T

from epochal import ListOperatorState, Pipeline, SinkMode, SinkSpec

from . import totals

COUNTS = T.StructType([T.StructField("rows_in_epoch", T.LongType()), T.StructField("rows_total", T.LongType())])


class RowsPerSubtask:
    SEEN = ListOperatorState("seen", value_type=T.LongType())
    name, inputs, outputs, keyed_state, operator_state = "count", ("read.rows",), ("counts",), (), (SEEN,)

    def initialize_state(self, context):
        self.seen = context.operator_state_store.get_list_state(self.SEEN)

    def process(self, ctx, inputs):
        rows = inputs["read.rows"]
        old = self.seen.get().select("subtask", "value")
        now = rows.select(F.expr(f"pmod(hash(key), {ctx.parallelism})").alias("subtask"), F.lit(1).cast("long").alias("value"))
        self._new = old.unionByName(now).groupBy("subtask").agg(F.sum("value").alias("value"))
        before = old.agg(F.coalesce(F.sum("value"), F.lit(0)).cast("long").alias("before"))
        n = rows.agg(F.count(F.lit(1)).alias("rows_in_epoch"))
        return {"counts": n.crossJoin(before).select("rows_in_epoch", (F.col("before") + F.col("rows_in_epoch")).alias("rows_total"))}

    def snapshot_state(self, context):
        self.seen.update(self._new)


# An upsert sink with a MAP column (its MERGE and its rewrite compare maps by their entries).
LABELS = T.StructType([T.StructField("key", T.StringType()),
                       T.StructField("attrs", T.MapType(T.StringType(), T.LongType()))])


class Labels:
    name, inputs, outputs, keyed_state, operator_state = "label", ("sum.totals",), ("labels",), (), ()

    def process(self, ctx, inputs):
        totals = inputs["sum.totals"]
        attrs = F.create_map(F.lit("total"), F.col("total"), F.lit("digits"), F.length(F.col("total").cast("string")).cast("long"))
        return {"labels": totals.select("key", attrs.alias("attrs"))}


def build(settings):
    base = totals.build(settings)
    return Pipeline(name=base.name, sources=base.sources, stages=[*base.stages, RowsPerSubtask(), Labels()],
                    sinks=[*base.sinks, SinkSpec("counts", "count.counts", SinkMode.APPEND, COUNTS),
                           SinkSpec("labels", "label.labels", SinkMode.UPSERT, LABELS, keys=("key",))],
                    max_parallelism=16)
'''


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, totals: str, pipeline: str = "acme.totals:build"):
    modules = {"rows": ROWS_MODULE, "totals": totals, "counted": COUNTED_MODULE}
    with on_import_path(tmp_path / "site", "acme", modules, monkeypatch):
        write_landing(tmp_path, EPOCHS)
        config = {
            "pipeline": pipeline,
            "landing": "landing",  # warehouse and checkpoints: the defaults, data/... next to this file
            "partitions": {"start": "2026-11-01T00:00:00Z"},
            "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
            "checkpoints": {"interval_epochs": 1, "retain": 2},
        }
        (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
        yield tmp_path


@pytest.fixture()
def project(tmp_path, monkeypatch):
    yield from _project(tmp_path, monkeypatch, TOTALS_MODULE, "acme.counted:build")


@pytest.fixture()
def random_project(tmp_path, monkeypatch):
    yield from _project(tmp_path, monkeypatch, RANDOM_TOTALS_MODULE)


def _verify(project: Path, *args: str, to: str = "2026-11-01-02:00") -> subprocess.CompletedProcess:
    command = [EPOCHAL, "verify", "--config", str(project / "epochal.yaml"), "--from", "2026-11-01-00:00", "--to", to, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=1500, cwd=project)


def test_the_range_defaults_to_a_few_partitions():
    hourly = Partitioning.from_settings(load_settings(None).partitions)
    assert _range(hourly, None, None) == (0, DEFAULT_PARTITIONS - 1)
    assert _range(hourly, "2026-11-01-05:00", None) == (5, 5 + DEFAULT_PARTITIONS - 1)
    assert _range(hourly, None, "2026-11-01-01:00") == (0, 1)
    with pytest.raises(PipelineError, match="before --from"):
        _range(hourly, "2026-11-01-05:00", "2026-11-01-04:00")


def test_the_scenarios_storage_is_a_copy_and_the_partitions_start_at_from(tmp_path):
    settings = load_settings(None).model_copy(update={"warehouse": str(tmp_path / "real")})
    verifier = Verifier(settings, cli=["epochal"], from_="2026-11-01-04:00", points=[], seeds=0, workdir=tmp_path / "w")
    copy = verifier.scenario_settings("crash-in_sink", parallelism=3)
    assert copy.warehouse == str(tmp_path / "w" / "crash-in_sink" / "warehouse")
    assert copy.checkpoints.dir == str(tmp_path / "w" / "crash-in_sink" / "checkpoints")
    assert copy.checkpoints.retain >= DEFAULT_PARTITIONS + 2  # the middle checkpoint is kept to restore
    assert (copy.landing, copy.spark.parallelism) == (settings.landing, 3)
    assert copy.partitions.start.hour == 4 and (verifier.from_key, verifier.to_key) == ("2026-11-01-04:00", "2026-11-01-06:00")


def test_killed_processes_of_a_short_verify_start_with_the_quick_compiler(tmp_path):
    """A killed process runs an epoch or two in a fresh JVM (``spark.jit: auto`` would pick tiered for three)."""
    settings = load_settings(None)
    short = Verifier(settings, cli=["epochal"], points=[], seeds=0, workdir=tmp_path / "short")
    assert load_settings(short._deploy("crash-in_sink")).spark.jit.value == "quick"
    day = Verifier(settings, cli=["epochal"], from_="2026-11-01-00:00", to="2026-11-01-23:00", points=[], seeds=0,
                   workdir=tmp_path / "day")
    assert load_settings(day._deploy("crash-in_sink")).spark.jit.value == "auto", "a long range keeps tiered's speed"
    tiered = settings.model_copy(update={"spark": settings.spark.model_copy(update={"jit": Jit.TIERED})})
    mine = Verifier(tiered, cli=["epochal"], points=[], seeds=0, workdir=tmp_path / "mine")
    assert load_settings(mine._deploy("crash-in_sink")).spark.jit.value == "tiered", "an explicit choice stays"


def test_a_random_instant_after_the_killed_run_ended_is_drawn_again_within_the_time_it_took(tmp_path, monkeypatch):
    """The straight runs here may take longer than a fresh killed process (its quick compiler, or a first run that
    warmed this JVM up): an instant past the killed run's end killed nothing, and verify said OK with no random
    crash at all (found from outside, 2026-11-30). Then the instant is drawn again within what that run took."""
    verifier = Verifier(load_settings(None), cli=["epochal"], points=[], seeds=1, workdir=tmp_path / "w")
    verifier._epochs_s = 90.0
    work_s = 4.0  # what a killed process's work takes: an instant past it kills nothing
    instants = []

    def killed(config, args, *, crash_at=None, after_s=None):
        instants.append(after_s)
        return after_s < work_s

    class Runner:
        def run(self, to):
            pass

    monkeypatch.setattr(verifier, "_killed", killed)
    monkeypatch.setattr(verifier, "_runner", lambda name: Runner())
    monkeypatch.setattr(verifier, "_compare", lambda runner: ScenarioResult("", "", Outcome.MATCH))
    monkeypatch.setattr("epochal.pipeline.verify.engine._clock", iter([0.0, 5.0, 10.0, 15.0, 20.0, 25.0]).__next__)
    result = verifier._random(0)
    assert instants[0] > work_s and len(instants) >= 2, instants  # seed 0 draws past the work first
    assert all(later <= 0.9 * 5.0 for later in instants[1:]), instants  # within the 5 s the finished run took
    if instants[-1] < work_s:
        assert result.outcome is Outcome.MATCH and result.crash.endswith(f"(draw {len(instants)})")
    else:
        assert result.outcome is Outcome.NOT_REACHED and len(instants) == RANDOM_ATTEMPTS


@pytest.mark.slow
def test_verify_passes_every_scenario_on_a_deterministic_pipeline(project):
    """Two partitions: the second epoch writes only key ``a``, so a restore of the first checkpoint must bring
    the sink's ``b`` back from the version the checkpoint recorded (the stage has no ``view()``). The per-subtask
    counter's operator state differs after the rescale (2 -> 3: ``a`` and ``b`` counted on subtasks 0 and 1,
    then ``a`` on subtask 2): a note, not a failure, while its sink matches. The map-valued upsert sink matches
    in every scenario, and delta-rs reads its maps."""
    from deltalake import DeltaTable

    work = project / "verify-work"
    result = _verify(project, "--points", "after_metadata", "--seeds", "0", "--json", "--keep", "--workdir", str(work),
                     to="2026-11-01-01:00")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert (report["ok"], report["from"], report["to"], report["epochs"]) == (True, "2026-11-01-00:00", "2026-11-01-01:00", 2)
    assert report["non_deterministic"] == []
    assert report["warnings"] == [], "nothing in the README's totals or the per-subtask counter depends on a re-run"
    outcomes = {s["name"]: s["result"] for s in report["scenarios"]}
    assert outcomes == {
        "straight": "reference",
        "straight again (determinism)": "match",
        "restore middle checkpoint": "match",
        "savepoint, restore with parallelism 3": "match",
        "crash after_metadata (epoch 1)": "match",
    }
    crash = report["scenarios"][-1]
    assert (crash["kind"], crash["crash"], crash["differences"]) == ("crash", "after_metadata:1", [])
    notes = {s["name"]: s["note"] for s in report["scenarios"] if s["note"]}
    assert list(notes) == ["savepoint, restore with parallelism 3"] and "state:count/seen" in notes[list(notes)[0]]
    assert "verify [5/5] crash after_metadata (epoch 1): match" in result.stderr  # progress
    assert not (project / "data").exists(), "the user's own warehouse and checkpoints are never touched"
    labels = DeltaTable(str(work / "straight" / "warehouse" / "labels")).to_pyarrow_table().to_pylist()
    assert sorted((r["key"], sorted(r["attrs"])) for r in labels) == [  # a = 1 + 10, b = 2
        ("a", [("digits", 2), ("total", 11)]), ("b", [("digits", 1), ("total", 2)])]


@pytest.mark.slow
def test_verify_names_a_non_deterministic_stage_and_its_sink(random_project):
    result = _verify(random_project, "--points", "in_sink", "--seeds", "1", to="2026-11-01-01:00")  # two suffice
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout
    assert any(line.startswith("straight again (determinism) ") and "NON-DETERMINISTIC" in line for line in table.splitlines())
    assert "sink:totals" in table and "state:sum/total" in table
    for skipped in ("restore middle checkpoint", "crash in_sink (epoch 1)", "random instant (seed 0)"):
        assert any(line.startswith(skipped) and "skipped" in line for line in table.splitlines()), table
    reason = [line for line in result.stderr.splitlines() if line.startswith("epochal: verify failed:")]
    assert len(reason) == 1 and "non-deterministic stage sum" in reason[0] and "sink:totals" in reason[0], result.stderr
    sample = reason[0].split("e.g. ", 1)[1].split(" ", 1)[1]
    assert set(json.loads(sample)) == {"key", "total"}  # a sample row of the sink
    warnings = table.split("\nwarnings: ", 1)[1].splitlines()[1:]
    assert [w.split(": rand()", 1)[0].strip() for w in warnings] == ["stage sum, keyed state total", "stage sum, output totals"]
    assert not (random_project / "data").exists()
