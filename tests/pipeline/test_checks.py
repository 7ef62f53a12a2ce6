"""The ``state_consistent`` check Dagster runs after every partition (a range run compares its upsert sinks
after its last): it passes on a deployment the runner wrote, and fails, naming the sink and counting the rows,
when a sink no longer agrees with the state."""

from __future__ import annotations

from pyspark.sql import functions as F

from epochal.pipeline.checks import UPSERTS_AT_END, state_consistency
from epochal.state.delta import io as delta_io
from epochal.state.delta.log import DeltaLog

import tests.support.toy_pipeline as toy
from tests.pipeline.test_runner import _deploy, _runner


def _restore(spark, path: str, version: int) -> None:
    spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {version}")


def test_state_consistency_passes_then_finds_each_kind_of_drift(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path))
    runner.run(to="2026-11-01-01:00")
    d = runner.d
    totals, log = d.sinks["totals"], d.sinks["log"]

    ok = state_consistency(d, 1)
    assert ok.passed, ok.description
    assert ok.metadata == {"totals_rows_differing": 0, "log_rows_ahead_of_state": 0}
    assert not delta_io.may_hold_above(log.path, "epoch", 1)  # the statistics answer: no Spark job
    assert delta_io.may_hold_above(log.path, "epoch", 0)

    # an upsert sink with a changed value: one row only in the sink, one only in the state's view
    version = DeltaLog(totals.path).latest_version()
    spark.sql(f"UPDATE delta.`{totals.path}` SET total = 999 WHERE key = 'a'")
    changed = state_consistency(d, 1)
    assert not changed.passed and changed.metadata["totals_rows_differing"] == 2
    assert "sink totals differs from sum's state in 2 row(s)" in changed.description
    # before a range run's last partition the upsert sinks are left to its end, and the check says so
    deferred = state_consistency(d, 1, compare_upserts=False)
    assert deferred.passed and deferred.metadata == {"totals_not_checked": UPSERTS_AT_END, "log_rows_ahead_of_state": 0}
    assert deferred.description == f"the sinks checked agree with the state: log; not checked: totals ({UPSERTS_AT_END})"
    _restore(spark, totals.path, version)

    # a duplicated row counts once more (rows are compared with their multiplicity), a missing one once
    totals.read().where("key = 'c'").write.format("delta").mode("append").save(totals.path)
    assert state_consistency(d, 1).metadata["totals_rows_differing"] == 1
    _restore(spark, totals.path, version)
    spark.sql(f"DELETE FROM delta.`{totals.path}` WHERE key = 'b'")
    assert state_consistency(d, 1).metadata["totals_rows_differing"] == 1
    _restore(spark, totals.path, version)
    assert state_consistency(d, 1).passed

    # an append sink with a row of an epoch the state has not reached
    log.read().limit(1).withColumn("epoch", F.lit(2).cast(log.read().schema["epoch"].dataType)) \
        .write.format("delta").mode("append").save(log.path)
    ahead = state_consistency(d, 1)
    assert not ahead.passed and ahead.metadata["log_rows_ahead_of_state"] == 1
    assert "sink log has rows of epochs after 1" in ahead.description
    assert not state_consistency(d, 1, compare_upserts=False).passed  # append sinks are checked every time
    assert state_consistency(d, 2).metadata["log_rows_ahead_of_state"] == 0


class _SumWithoutView:
    """The toy pipeline's ``sum`` stage without a ``view()`` (DESIGN: a stage need not have one)."""

    name, inputs, outputs, keyed_state, operator_state = (
        toy.Sum.name, toy.Sum.inputs, toy.Sum.outputs, toy.Sum.keyed_state, toy.Sum.operator_state)
    process = toy.Sum.process


def test_state_consistency_names_the_upsert_sink_it_cannot_check_and_claims_only_the_others(spark, tmp_path, toy_registered):
    runner = _runner(spark, _deploy(tmp_path))
    runner.run(to="2026-11-01-00:00")
    d = runner.d
    d.pipeline.stages[1].__class__ = _SumWithoutView
    assert not hasattr(d.pipeline.stages[1], "view")
    spark.sql(f"UPDATE delta.`{d.sinks['totals'].path}` SET total = 999")  # drift the check cannot see

    outcome = state_consistency(d, 0)
    assert outcome.passed  # nothing it checked disagrees ...
    assert outcome.description == ("the sinks checked agree with the state: log; "
                                   "not checked: totals (stage 'sum' has no view())")
    assert "every sink" not in outcome.description  # ... and it does not claim the unchecked sink agrees
    assert outcome.metadata == {"totals_not_checked": "stage 'sum' has no view()", "log_rows_ahead_of_state": 0}

    before = state_consistency(d, None)  # no epoch done: no state to compare the upsert sink with
    assert before.metadata["totals_not_checked"].startswith("no epoch done yet")
