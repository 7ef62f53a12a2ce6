"""What ``epochal verify`` compares: multisets in Spark, maps by content, keyed state by its live rows."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from epochal.pipeline.verify.compare import diff_table

CLOCK = datetime(2026, 11, 1, 3, tzinfo=timezone.utc)
KEYED = "key_group int, key string, namespace string, value map<string,bigint>, expires_at timestamp, updated_epoch bigint"


def _table(spark, path, rows, schema) -> str:
    spark.createDataFrame(rows, schema).write.format("delta").mode("overwrite").save(str(path))
    return str(path)


def test_keyed_state_compares_live_rows_and_maps_by_content_not_bookkeeping(spark, tmp_path):
    live, expired = datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
    reference = _table(spark, tmp_path / "ref", [(1, "a", "", {"x": 1, "y": 2}, live, 1)], KEYED)
    # The same live row (its map built in another order, written in another epoch), plus an expired row.
    same = _table(spark, tmp_path / "same", [(1, "a", "", {"y": 2, "x": 1}, live, 2), (3, "b", "", {"z": 9}, expired, 0)], KEYED)
    assert diff_table(spark, "state:s/t", "s", reference, same, clock=CLOCK) is None

    other = _table(spark, tmp_path / "other", [(1, "a", "", {"x": 1, "y": 3}, live, 1)], KEYED)
    diff = diff_table(spark, "state:s/t", "s", reference, other, clock=CLOCK)
    assert (diff.missing, diff.extra, diff.sample_side, diff.sample["key"]) == (1, 1, "missing", "a")
    assert "state:s/t: 1 row(s) missing, 1 extra; e.g. missing" in diff.describe()


def test_a_sink_is_a_multiset_and_an_empty_table_equals_none(spark, tmp_path):
    schema = "key string, total bigint, epoch bigint"
    reference = _table(spark, tmp_path / "ref", [("a", 1, 0)], schema)
    twice = _table(spark, tmp_path / "twice", [("a", 1, 0), ("a", 1, 0)], schema)
    diff = diff_table(spark, "sink:t", "sum", reference, twice, clock=CLOCK)
    assert (diff.missing, diff.extra, diff.sample) == (0, 1, {"key": "a", "total": 1, "epoch": 0})
    empty = _table(spark, tmp_path / "empty", [], schema)
    assert diff_table(spark, "sink:t", "sum", empty, str(tmp_path / "none"), clock=CLOCK) is None
    assert "exists in the reference only" in diff_table(spark, "sink:t", "sum", reference, None, clock=CLOCK).describe()


def test_tables_compared_together_each_to_the_microsecond_with_zero_signs_equal(spark, tmp_path):
    from datetime import timedelta

    from epochal.pipeline.verify.compare import diff_tables

    schema = "k string, at timestamp, x double, xs array<double>"
    at = datetime(2026, 11, 1, 1, 2, 3, 456789, tzinfo=timezone.utc)
    reference = _table(spark, tmp_path / "ref", [("a", at, 0.0, [0.0, 1.0]), ("b", at, 1.5, [])], schema)
    same = _table(spark, tmp_path / "same", [("b", at, 1.5, []), ("a", at, -0.0, [0.0, 1.0])], schema)
    later = _table(spark, tmp_path / "later", [("a", at + timedelta(microseconds=1), 0.0, [0.0, 1.0]), ("b", at, 1.5, [])], schema)
    other = _table(spark, tmp_path / "other", [("a", at, 0.0, [0.0, 1.0])], "k string, at timestamp, x double, ys array<double>")
    diffs = diff_tables(spark, [("sink:same", "s", reference, same), ("sink:later", "s", reference, later),
                                ("sink:other", "s", reference, other), ("sink:gone", "s", reference, None)], clock=CLOCK)
    assert [d.table for d in diffs] == ["sink:gone", "sink:later", "sink:other"]
    gone, later_diff, other_diff = diffs
    assert (gone.missing, gone.extra) == (2, 0) and "reference only" in gone.describe()
    assert (later_diff.missing, later_diff.extra, later_diff.sample_side, later_diff.sample["k"]) == (1, 1, "missing", "a")
    assert later_diff.sample["at"].endswith(".456789Z")
    assert "columns differ" in other_diff.describe()


def test_an_operator_state_difference_is_marked_as_such_and_a_note_shows_under_an_ok_table(spark, tmp_path):
    from epochal.pipeline.verify.report import Outcome, ScenarioResult, VerifyReport

    schema = "subtask int, ord int, parallelism int, map_key string, value bigint"
    reference = _table(spark, tmp_path / "ref", [(0, 0, 2, None, 2), (1, 0, 2, None, 1)], schema)
    rescaled = _table(spark, tmp_path / "rescaled", [(0, 0, 3, None, 1), (1, 0, 3, None, 1), (2, 0, 3, None, 1)], schema)
    diff = diff_table(spark, "state:count/seen", "count", reference, rescaled, clock=CLOCK, rescaled=True)
    assert (diff.kind, diff.missing, diff.extra) == ("operator", 1, 0)
    keyed = _table(spark, tmp_path / "keyed", [(1, "a", "", {"x": 1}, None, 1)], KEYED)
    assert diff_table(spark, "state:s/t", "s", keyed, None, clock=CLOCK).kind is None

    note = f"operator state differs after the rescale: {diff.describe()}"
    report = VerifyReport("acme.counted:build", "a", "b", 2, None, False,
                          [ScenarioResult("savepoint, restore with parallelism 3", "savepoint", Outcome.MATCH, note=note)])
    text = report.table()
    assert report.ok and "none (note below)" in text and "(but for the notes below)" in text
    assert f"  note: savepoint, restore with parallelism 3: {note}" in text


def test_warnings_of_the_plans_show_under_an_ok_table_and_in_the_json_and_fail_nothing():
    """An expression a re-run need not repeat (read from the plans: ``epochal.state.determinism``) is a
    warning: these runs agreed, so the exit status stays 0, and the table and the JSON say it."""
    from epochal.pipeline.verify.report import Outcome, ScenarioResult, VerifyReport

    warning = "stage enrich, output main: monotonically_increasing_id(): depends on how the rows are split"
    report = VerifyReport("acme.enrich:build", "a", "b", 2, None, False,
                          [ScenarioResult("straight", "straight", Outcome.REFERENCE)], warnings=[warning])
    text = report.table()
    assert report.ok and "(read the warnings below)" in text.splitlines()[-3]
    assert text.splitlines()[-1] == f"  {warning}" and json.loads(report.to_json())["warnings"] == [warning]


def test_when_the_straight_runs_differ_the_failure_names_the_stage_whose_plan_explains_it_first():
    """Two straight runs differ in a table of a downstream stage (``activity``), while ``read``'s plan holds
    ``rand()``: the failure names ``read`` (where it comes from) and then the table and its writer; the
    warnings under the table no longer say the runs agree."""
    from epochal.pipeline.verify.compare import TableDiff
    from epochal.pipeline.verify.report import Outcome, ScenarioResult, VerifyReport

    diff = TableDiff("sink:user_state", "activity", 2, 2)
    warning = "stage read, output rows: rand(): random"
    scenarios = [ScenarioResult("straight", "straight", Outcome.REFERENCE),
                 ScenarioResult("straight again (determinism)", "straight", Outcome.NON_DETERMINISTIC, [diff])]
    report = VerifyReport("acme.p:build", "a", "b", 3, None, False, scenarios,
                          warnings=[warning], sources={"read": ["rand(): random"]})
    assert report.reason() == ("non-deterministic stage read (read: rand(): random): two straight runs differ in "
                               "sink:user_state: 2 row(s) missing, 2 extra (written by stage activity)")
    text = report.table()
    assert f"FAILED: {report.reason()}" in text and "these runs agree" not in text and text.endswith(f"  {warning}")
    assert json.loads(report.to_json())["warning_stages"] == {"read": ["rand(): random"]}
    # nothing in the plans explains it (a Python UDF, say): the stage whose table differs, as before
    report.sources = {}
    assert report.reason().startswith("non-deterministic stage activity: two straight runs differ in sink:user_state")
