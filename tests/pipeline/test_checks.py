"""The ``state_consistent`` check Dagster runs after every partition: it passes on a deployment the runner
wrote, and fails, naming the sink and counting the rows, when a sink no longer agrees with the state."""

from __future__ import annotations

from pyspark.sql import functions as F

from epochal.pipeline.checks import state_consistency
from epochal.state.delta import io as delta_io
from epochal.state.delta.log import DeltaLog

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
    assert state_consistency(d, 2).metadata["log_rows_ahead_of_state"] == 0
