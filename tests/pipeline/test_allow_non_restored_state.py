"""Flink's ``allowNonRestoredState``: a savepoint taken before a stage was removed restores into the
new pipeline only when the operator says the removed stage's state may be dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from epochal.config import load_settings
from epochal.orchestration import console
from epochal.orchestration.cli import build_parser
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.errors import StateSchemaError, UnclaimedStateError
from tests.support.user_package import ROWS_MODULE, on_import_path, write_landing

MODULE = '''
from pyspark.sql import functions as F, types as T

from epochal import HourlyFolderSource, Pipeline, SinkMode, SinkSpec, ValueStateDescriptor

from .rows import TOTALS, ReadRows


class Sum:
    """A running total per key under the state called ``state``."""

    def __init__(self, name, state, value_type=T.LongType()):
        self.name, self.inputs, self.outputs, self.operator_state = name, ("read.rows",), ("totals",), ()
        self.total = ValueStateDescriptor(state, value_type=value_type)
        self.keyed_state = (self.total,)

    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.sum("n").alias("n"))
        new = ctx.keyed.lookup(self.total, batch, "key").select(
            "key", (F.coalesce(F.col(self.total.name), F.lit(0)) + F.col("n")).alias("value"))
        ctx.keyed.update(self.total, new)
        return {"totals": new.select("key", F.col("value").alias("total"))}


class Last:
    """The last row's n per key, as a struct (``fields``: its fields, all nullable)."""

    def __init__(self, fields):
        self.name, self.inputs, self.outputs, self.operator_state = "last", ("read.rows",), ("totals",), ()
        self.fields = fields
        self.last = ValueStateDescriptor("last", value_type=T.StructType([T.StructField(f, T.LongType()) for f in fields]))
        self.keyed_state = (self.last,)

    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.max("n").alias("n"))
        value = F.struct(*[F.col("n").alias(f) if f == "n" else F.lit(None).cast("long").alias(f) for f in self.fields])
        ctx.keyed.update(self.last, batch.select("key", value.alias("value")))
        return {"totals": batch.select("key", F.col("n").alias("total"))}


def _pipeline(settings, stages):
    return Pipeline(
        name="totals", sources=[HourlyFolderSource("landing", settings.landing)], stages=[ReadRows(), *stages],
        sinks=[SinkSpec("totals", "sum.totals", SinkMode.UPSERT, TOTALS, keys=("key",))], max_parallelism=16,
    )


def with_counts(settings):
    return _pipeline(settings, [Sum("sum", "total"), Sum("counts", "count")])


def without_counts(settings):
    return _pipeline(settings, [Sum("sum", "total")])


def with_last(settings):
    return _pipeline(settings, [Sum("sum", "total"), Last(["n"])])


def with_last_widened(settings):
    return _pipeline(settings, [Sum("sum", "total"), Last(["n", "seen"])])


def retyped(settings):
    return _pipeline(settings, [Sum("sum", "total", T.DoubleType()), Sum("counts", "count", T.DoubleType())])
'''


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with on_import_path(tmp_path / "site", "acme_versions", {"rows": ROWS_MODULE, "totals": MODULE}, monkeypatch):
        write_landing(tmp_path, [[("a", 1)], [("a", 10), ("b", 2)], [("a", 100)]])
        yield tmp_path


def _runner(spark, project: Path, factory: str) -> EpochRunner:
    config = {
        "pipeline": f"acme_versions.totals:{factory}",
        "landing": "landing",
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
    }
    (project / "epochal.yaml").write_text(yaml.safe_dump(config))
    return EpochRunner(build_deployment(load_settings(project / "epochal.yaml"), spark))


def test_a_removed_stage_is_refused_unless_its_state_may_be_dropped(spark, project):
    old = _runner(spark, project, "with_counts")
    old.run(to="2026-11-01-01:00")
    savepoint = old.savepoint("before-removal")["path"]

    new = _runner(spark, project, "without_counts")
    with pytest.raises(UnclaimedStateError, match="counts/count"):
        new.restore(savepoint)
    restored = new.restore(savepoint, allow_non_restored_state=True)
    assert restored.epoch == 1 and restored.dropped == ("counts/count",), "the restore names what it dropped"
    assert "  dropped counts/count (no stage declares it: --allow-non-restored-state)" in console.restore(restored.to_dict())
    stage = next(s for s in new.d.pipeline.stages if s.name == "sum")
    assert {r.key: r.value for r in new.d.keyed["sum"].values(stage.total).collect()} == {"a": 11, "b": 2}


def test_the_cli_and_the_dagster_job_take_the_flag():
    from epochal.orchestration.jobs import RestoreConfig

    args = build_parser().parse_args(["restore", "--savepoint", "sp", "--allow-non-restored-state"])
    assert args.allow_non_restored_state is True
    assert build_parser().parse_args(["restore"]).allow_non_restored_state is False
    assert RestoreConfig(allow_non_restored_state=True).allow_non_restored_state


def test_a_run_of_changed_code_is_refused_until_a_restore_reconciles_its_states(spark, project):
    """Found from outside: a run of a pipeline whose stage was removed or renamed went on without a word (a renamed
    stage from empty state, its upsert sink overwritten with one epoch's totals), and a stage declared again
    resumed from the rows it had written before its removal, missing the epochs between."""
    _runner(spark, project, "with_counts").run(to="2026-11-01-00:00")

    removed = _runner(spark, project, "without_counts")
    with pytest.raises(PipelineError, match=r"no longer declares state counts/count, which the state at "
                                            r"2026-11-01-00:00 holds.*epochal restore --allow-non-restored-state"):
        removed.run(to="2026-11-01-01:00")
    removed.restore(allow_non_restored_state=True)
    removed.run(to="2026-11-01-01:00")

    back = _runner(spark, project, "with_counts")
    with pytest.raises(PipelineError, match=r"state counts/count is declared again, but its working table holds"):
        back.run(to="2026-11-01-02:00")
    back.restore()  # the latest checkpoint holds no counts/count: its working table is emptied
    back.run(to="2026-11-01-02:00")
    counts = next(s for s in back.d.pipeline.stages if s.name == "counts")
    assert {r.key: r.value for r in back.d.keyed["counts"].values(counts.total).collect()} == {"a": 100}


def test_a_state_whose_value_type_changed_is_refused_before_the_run(spark, project):
    """Found from outside (probe 4): a keyed state's changed value type was refused at its first write, in the
    middle of an epoch, which then stayed in progress and failed its recovery the same way."""
    _runner(spark, project, "with_counts").run(to="2026-11-01-00:00")

    changed = _runner(spark, project, "retyped")
    with pytest.raises(StateSchemaError, match=r"state sum/total: value type double differs from the stored bigint; "
                                               r"state counts/count: value type double differs"):  # both named
        changed.run(to="2026-11-01-01:00")
    progress = changed.d.progress.load()
    assert progress.clean and progress.last_done_epoch == 0  # nothing started
    again = _runner(spark, project, "with_counts")  # the old code runs on, no recovery needed
    assert again.d.keyed["sum"].read(next(s for s in again.d.pipeline.stages if s.name == "sum").total) \
        .where("updated_epoch > 0").isEmpty()
    again.run(to="2026-11-01-01:00")
    assert again.d.progress.load().last_done_epoch == 1


def test_a_nullable_field_added_is_refused_until_a_restore_migrates_it_and_says_so(spark, project):
    """Found from outside (probe 5): the refusal did not say that a restore fixes an added nullable field, and the
    restore did not say which state it migrated."""
    from epochal.orchestration import console

    _runner(spark, project, "with_last").run(to="2026-11-01-00:00")
    widened = _runner(spark, project, "with_last_widened")
    with pytest.raises(StateSchemaError, match=r"state last/last: value type struct<n:bigint,seen:bigint> differs.*"
                                               r"if only nullable fields were added, run `epochal restore`"):
        widened.run(to="2026-11-01-01:00")
    restored = widened.restore()
    assert restored.migrated == ("last/last: value.seen",)
    assert "  migrated last/last: value.seen (added, null in the restored rows)" in console.restore(restored.to_dict())
    from epochal.orchestration.metadata import restore_metadata
    assert restore_metadata(restored, "restore")["migrated"].value == "last/last: value.seen"  # on the Dagster assets
    widened.run(to="2026-11-01-01:00")
    stage = next(s for s in widened.d.pipeline.stages if s.name == "last")
    assert {r.key: tuple(r.value) for r in widened.d.keyed["last"].values(stage.last).collect()} == {"a": (10, None), "b": (2, None)}


def test_a_crash_after_a_restore_that_dropped_state_recovers_dropping_it_again(spark, project):
    """Found from outside (probe 15): a crash in the first epoch after ``restore --allow-non-restored-state`` (no
    checkpoint taken since) left every later run refused: its recovery restored the same savepoint without the flag.
    As Flink's failover keeps the job's restore settings, the recovery drops the same state again; so does a backfill
    that restores a snapshot from before that restore. A snapshot taken after it is never restored with the flag."""
    old = _runner(spark, project, "with_counts")
    old.run(to="2026-11-01-01:00")
    savepoint = old.savepoint("before-removal")["path"]
    new = _runner(spark, project, "without_counts")
    new.restore(savepoint, allow_non_restored_state=True)
    new.d.progress.start(2)  # the next run's process dies in epoch 2, before any checkpoint of the new code

    recovered = _runner(spark, project, "without_counts")
    report = recovered.run(to="2026-11-01-02:00")
    assert report.restored is not None and report.restored.dropped == ("counts/count",)
    stage = next(s for s in recovered.d.pipeline.stages if s.name == "sum")
    assert {r.key: r.value for r in recovered.d.keyed["sum"].values(stage.total).collect()} == {"a": 111, "b": 2}

    backfill = _runner(spark, project, "without_counts")  # restores the old code's checkpoint of epoch 0
    backfill.run(from_="2026-11-01-01:00", to="2026-11-01-02:00")
    assert {r.key: r.value for r in backfill.d.keyed["sum"].values(stage.total).collect()} == {"a": 111, "b": 2}
    assert not backfill.recovery._dropped_before(10**6), "never for a snapshot taken after the restore"
