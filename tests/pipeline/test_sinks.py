"""Delta sinks: upsert deletions (Flink's ``RowKind.DELETE``), and the spec's checks."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from epochal import SinkMode, SinkSpec
from epochal.pipeline.sinks import DeltaSink

SCHEMA = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])


def _rows(sink: DeltaSink) -> dict[str, int]:
    return {r.key: r.total for r in sink.read().collect()}


@pytest.mark.parametrize("rewrite_below_bytes", [0, 1 << 30], ids=["merge", "rewrite"])
def test_an_upsert_sink_deletes_the_keys_its_input_marks_and_a_replay_changes_nothing(spark, tmp_path, rewrite_below_bytes):
    sink = DeltaSink(spark, str(tmp_path), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",),
                                                    delete_column="gone"), rewrite_below_bytes=rewrite_below_bytes)
    frame = "key string, total long, gone boolean"
    sink.write(spark.createDataFrame([("a", 1, False), ("b", 2, None), ("c", 3, True)], frame), 0)
    assert _rows(sink) == {"a": 1, "b": 2}  # a deletion of a key the sink never held is nothing
    epoch1 = spark.createDataFrame([("a", None, True), ("b", 5, False)], frame)
    assert sink.write(epoch1, 1) == 2  # one update, one deletion
    assert _rows(sink) == {"b": 5}
    assert "gone" not in sink.read().columns
    assert sink.write(epoch1, 1) == 0  # a replayed epoch changes no row
    assert _rows(sink) == {"b": 5}


def test_restoring_a_recorded_version_is_one_commit_and_a_foreign_position_is_refused(spark, tmp_path, caplog):
    sink = DeltaSink(spark, str(tmp_path / "wh"), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",)))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    at_zero = sink.position()
    sink.write(spark.createDataFrame([("a", 7), ("b", 1)], SCHEMA), 1)
    other = DeltaSink(spark, str(tmp_path / "elsewhere"), sink.spec)
    with caplog.at_level("WARNING", logger="epochal"):
        assert not other.restore_version(at_zero)  # another deployment's table: rewound by content instead
    assert [r.getMessage().split(",")[0] for r in caplog.records] == ["sink totals: the snapshot recorded another table"]
    assert str(tmp_path / "wh") in caplog.text and "rewinding it by content instead" in caplog.text  # with a warning
    assert sink.restore_version(at_zero)
    assert _rows(sink) == {"a": 1}
    assert sink.position().version == at_zero.version + 2


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": SinkMode.APPEND, "delete_column": "gone"}, "for upsert sinks"),
    ({"mode": SinkMode.UPSERT, "keys": ("key",), "delete_column": "total"}, "is a column of the sink's schema"),
])
def test_a_misplaced_delete_column_is_refused_naming_the_sink(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        SinkSpec("totals", "s.out", schema=SCHEMA, **kwargs)
    assert "totals" in str(info.value)


def _commit(sink: DeltaSink) -> dict:
    """The latest commit's ``commitInfo`` (mode and predicate of a WRITE)."""
    from epochal.state.delta.log import DeltaLog

    log = DeltaLog(sink.path)
    return next(a["commitInfo"] for a in log._commit(log.latest_version()) if "commitInfo" in a)


def test_an_append_sink_appends_a_new_epoch_and_replaces_a_replayed_one(spark, tmp_path):
    """The Delta log's file statistics tell a new epoch (a plain append, no scan) from a replay (replaceWhere)."""
    sink = DeltaSink(spark, str(tmp_path), SinkSpec("events", "s.out", SinkMode.APPEND, SCHEMA))
    sink.write(spark.createDataFrame([("a", 1), ("b", 2)], SCHEMA), 0)
    assert _commit(sink)["operationParameters"]["mode"] == "Append"
    sink.write(spark.createDataFrame([("c", 3)], SCHEMA), 1)
    assert _commit(sink)["operationParameters"]["mode"] == "Append"
    assert sink.write(spark.createDataFrame([("a", 1), ("d", 4)], SCHEMA), 0) == 2  # epoch 0 again: replaced
    replay = _commit(sink)["operationParameters"]
    assert replay["mode"] == "Overwrite" and "epoch = 0" in replay.get("predicate", "")
    rows = sorted((r.key, r.epoch) for r in spark.read.format("delta").load(sink.path).collect())
    assert rows == [("a", 0), ("c", 1), ("d", 0)]  # no duplicate, epoch 1 untouched


_CHANGES = ("numSourceRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")


def _history(sink: DeltaSink) -> list[tuple[str, dict]]:
    """Each commit's operation and its metrics."""
    from epochal.state.delta.log import DeltaLog

    log = DeltaLog(sink.path)
    infos = [next(a["commitInfo"] for a in log._commit(v) if "commitInfo" in a) for v in range(log.latest_version() + 1)]
    return [(i["operation"], {k: int(v) for k, v in i.get("operationMetrics", {}).items()}) for i in infos]


def test_a_small_upsert_sink_is_rewritten_as_the_merge_would_leave_it_and_its_log_says_merge(spark, tmp_path):
    """Epochs of inserts, updates, unchanged rows, deletions and null keys: the rewrite leaves the rows and the
    commits (operation MERGE, the same row metrics) that Delta's MERGE leaves, and delta-rs reads the result."""
    import random

    import deltalake

    schema = T.StructType([T.StructField("user", T.StringType()), T.StructField("day", T.LongType()),
                           T.StructField("total", T.DoubleType()), T.StructField("note", T.StringType())])
    spec = SinkSpec("totals", "s.out", SinkMode.UPSERT, schema, keys=("user", "day"), delete_column="gone")
    merged = DeltaSink(spark, str(tmp_path / "merge"), spec, rewrite_below_bytes=0)
    rewritten = DeltaSink(spark, str(tmp_path / "rewrite"), spec)
    chosen = random.Random(7)
    users = ["a", "b", "c", None, "e`f"]
    for epoch in range(5):
        keys = chosen.sample([(u, d) for u in users for d in (1, 2)], 6)
        batch = [(u, d, float(chosen.randint(0, 2)), chosen.choice([None, "x"]), chosen.random() < 0.25) for u, d in keys]
        frame = spark.createDataFrame(batch, "user string, day long, total double, note string, gone boolean")
        assert merged.write(frame, epoch) == rewritten.write(frame, epoch), epoch
    as_set = lambda sink: sorted(map(tuple, sink.read().collect()), key=str)  # noqa: E731
    assert as_set(rewritten) == as_set(merged) and as_set(rewritten)
    history, merges = _history(rewritten), _history(merged)
    assert [op for op, _ in history] == [op for op, _ in merges] == ["CREATE TABLE"] + ["MERGE"] * 5
    for (_, ours), (_, delta) in zip(history[1:], merges[1:]):
        assert {k: ours[k] for k in _CHANGES} == {k: delta[k] for k in _CHANGES}
        # Every row is rewritten: those not inserted or updated are copied (Delta's MERGE copies those of the files it touches).
        assert ours["numOutputRows"] == ours["numTargetRowsCopied"] + ours["numTargetRowsInserted"] + ours["numTargetRowsUpdated"]
    assert history[-1][1]["numOutputRows"] == len(as_set(rewritten))
    read_by_rust = deltalake.DeltaTable(rewritten.path)
    assert sorted(map(tuple, read_by_rust.to_pandas()[["user", "day", "total", "note"]].astype(object).where(
        lambda d: d.notna(), None).itertuples(index=False)), key=str) == as_set(rewritten)
    assert read_by_rust.history(1)[0]["operation"] == "MERGE"


def test_a_rewrite_refuses_an_epoch_naming_a_key_twice_and_commits_nothing(spark, tmp_path):
    from epochal.pipeline.errors import PipelineError

    sink = DeltaSink(spark, str(tmp_path), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",)))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    version = sink.position().version
    with pytest.raises(PipelineError, match=r"upsert sink 'totals'.*1 key\(s\).*more than once"):
        sink.write(spark.createDataFrame([("b", 1), ("b", 2), ("c", 3)], SCHEMA), 1)
    assert sink.position().version == version and _rows(sink) == {"a": 1}


@pytest.mark.parametrize("prop", ["delta.enableChangeDataFeed", "delta.enableRowTracking"])
def test_a_sink_whose_readers_would_see_a_rewrite_differently_is_merged(spark, tmp_path, prop):
    from epochal.pipeline import sink_rewrite
    from epochal.state.delta.log import DeltaLog

    def rewritable(sink: DeltaSink):
        log = DeltaLog(sink.path)
        return sink_rewrite.rewritable(log.snapshot(log.latest_version()), sink.table_schema, 1 << 30)

    sink = DeltaSink(spark, str(tmp_path), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",)))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    assert rewritable(sink) is not None
    spark.sql(f"ALTER TABLE delta.`{sink.path}` SET TBLPROPERTIES ('{prop}' = 'true')")
    assert rewritable(sink) is None
    assert sink.write(spark.createDataFrame([("a", 2), ("b", 1)], SCHEMA), 1) == 2
    assert _rows(sink) == {"a": 2, "b": 1}


@pytest.mark.parametrize("rewrite_below_bytes", [0, 1 << 30], ids=["merge", "rewrite"])
def test_a_sink_spec_with_a_column_its_table_lacks_is_refused_naming_it_and_the_table_is_unchanged(
        spark, tmp_path, rewrite_below_bytes):
    """A nullable column added to an upsert SinkSpec: Delta's MERGE said DELTA_MERGE_UNRESOLVED_EXPRESSION."""
    from epochal.pipeline.errors import SinkError

    sink = DeltaSink(spark, str(tmp_path), SinkSpec("user_totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",)))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    version = sink.position().version
    wider = T.StructType(SCHEMA.fields + [T.StructField("buys", T.LongType())])
    grown = DeltaSink(spark, str(tmp_path), SinkSpec("user_totals", "s.out", SinkMode.UPSERT, wider, keys=("key",)),
                      rewrite_below_bytes=rewrite_below_bytes)
    with pytest.raises(SinkError) as refused:
        grown.write(spark.createDataFrame([("a", 2, 3)], wider), 1, partition="2026-11-01-01:00")
    assert str(refused.value) == (
        f"sink 'user_totals' failed at epoch 1 (partition 2026-11-01-01:00): its table {sink.path} does not have the "
        "SinkSpec's columns (missing from the table: buys BIGINT); nothing was written to it. Operator action: run "
        "`epochal restore` first (the recovery of the failed epoch restores the table's earlier version, which would "
        f"undo a change made before it), then add the column(s) to the table (ALTER TABLE delta.`{sink.path}` ADD "
        "COLUMNS (buys BIGINT)) and run again; or change the SinkSpec back")
    assert sink.position().version == version and _rows(sink) == {"a": 1} and sink.read().columns == ["key", "total"]
    assert refused.value.sink == "user_totals" and refused.value.context["table"] == sink.path


def test_an_append_sink_whose_spec_dropped_and_retyped_columns_is_refused_naming_each(spark, tmp_path):
    from epochal.pipeline.errors import SinkSchemaError

    sink = DeltaSink(spark, str(tmp_path), SinkSpec("events", "s.out", SinkMode.APPEND, SCHEMA))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    version = sink.position().version
    # the epoch column the sink adds is not the spec's, and a name differing only in case is the same column
    changed = T.StructType([T.StructField("KEY", T.IntegerType()), T.StructField("amount", T.DoubleType())])
    with pytest.raises(SinkSchemaError) as refused:
        DeltaSink(spark, str(tmp_path), SinkSpec("events", "s.out", SinkMode.APPEND, changed)).write(
            spark.createDataFrame([(1, 2.0)], changed), 1)
    message = str(refused.value)
    assert message.startswith(f"sink 'events' failed at epoch 1: its table {sink.path} does not have the SinkSpec's "
                              "columns (missing from the table: amount DOUBLE; missing from the SinkSpec: total BIGINT; "
                              "changed type: KEY is STRING in the table, INT in the SinkSpec); nothing was written")
    assert "Operator action: change the SinkSpec back to the table's columns; or run `epochal restore` first" in message
    assert "\n" not in message and sink.position().version == version


@pytest.mark.parametrize("rewrite_below_bytes", [0, 1 << 30], ids=["merge", "rewrite"])
def test_an_upsert_sink_with_map_values_compares_them_by_their_entries(spark, tmp_path, rewrite_below_bytes):
    """A map state's values are maps, and a sink of them is the obvious thing to write: Spark has no ``<=>`` for
    maps, so the MERGE and the rewrite compare a map by its sorted entries (a map of the same entries in another
    order is unchanged; nested maps too), and delta-rs reads the table."""
    import deltalake

    schema = T.StructType([
        T.StructField("user", T.StringType()),
        T.StructField("by_currency", T.MapType(T.StringType(), T.LongType())),
        T.StructField("detail", T.StructType([T.StructField("tags", T.ArrayType(T.MapType(T.StringType(), T.StringType())))])),
    ])
    sink = DeltaSink(spark, str(tmp_path), SinkSpec("spend", "s.out", SinkMode.UPSERT, schema, keys=("user",)),
                     rewrite_below_bytes=rewrite_below_bytes)
    frame = ("user string, by_currency map<string, bigint>, detail struct<tags: array<map<string, string>>>")
    first = spark.sql("SELECT 'a' AS user, map('EUR', 1L, 'USD', 2L) AS by_currency, "
                      "named_struct('tags', array(map('x', '1', 'y', '2'))) AS detail "
                      "UNION ALL SELECT 'b', map('EUR', 5L), named_struct('tags', array()) ")
    assert sink.write(first.to(spark.createDataFrame([], frame).schema), 0) == 2
    same_entries = spark.sql("SELECT 'a' AS user, map('USD', 2L, 'EUR', 1L) AS by_currency, "
                             "named_struct('tags', array(map('y', '2', 'x', '1'))) AS detail")
    assert sink.write(same_entries, 1) == 0  # the same entries in another order: nothing changed
    changed = spark.sql("SELECT 'b' AS user, map('EUR', 6L) AS by_currency, named_struct('tags', array()) AS detail")
    assert sink.write(changed, 2) == 1
    values = {r.user: dict(r.by_currency) for r in sink.read().collect()}
    assert values == {"a": {"EUR": 1, "USD": 2}, "b": {"EUR": 6}}
    read_by_rust = deltalake.DeltaTable(sink.path).to_pyarrow_table().to_pylist()
    assert {r["user"]: dict(r["by_currency"]) for r in read_by_rust} == values


def test_an_upsert_key_holding_a_map_is_refused_naming_the_sink():
    schema = T.StructType([T.StructField("tags", T.MapType(T.StringType(), T.StringType())), T.StructField("n", T.LongType())])
    with pytest.raises(ValueError, match=r"sink 'tagged': key\(s\) \['tags'\] hold a map"):
        SinkSpec("tagged", "s.out", SinkMode.UPSERT, schema, keys=("tags",))


@pytest.mark.parametrize("mode", [SinkMode.APPEND, SinkMode.UPSERT])
def test_a_string_that_is_not_utf8_fails_the_write_naming_the_sink_and_column_and_delta_rs_still_opens_it(spark, tmp_path, mode):
    """A ``_corrupt_record`` keeps the line's bytes: written as they are, delta-rs would refuse the whole table."""
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    keys = ("key",) if mode is SinkMode.UPSERT else ()
    sink = DeltaSink(spark, str(tmp_path), SinkSpec("quarantine", "s.out", mode, SCHEMA, keys=keys))
    sink.write(spark.createDataFrame([("caf\u00e9", 1)], SCHEMA), 0)
    latin1 = spark.range(1).select(F.unhex(F.lit("636166E9")).cast("string").alias("key"), F.lit(2).cast("long").alias("total"))
    with pytest.raises(Exception) as info:  # Spark's error (the append's TASK_WRITE_FAILED holds it as its cause)
        sink.write(latin1, 1)
    assert "sink 'quarantine', column 'key': a value is not valid UTF-8" in str(info.value)
    assert "F.make_valid_utf8" in str(info.value)
    assert DeltaTable(str(tmp_path / "quarantine")).to_pyarrow_table().to_pylist() == [
        {"key": "caf\u00e9", "total": 1, **({"epoch": 0} if mode is SinkMode.APPEND else {})}]
    sink.write(latin1.select(F.make_valid_utf8("key").alias("key"), "total"), 1)  # the way out the error names
    assert sorted(r["key"] for r in DeltaTable(str(tmp_path / "quarantine")).to_pyarrow_table().to_pylist()) == ["caf\u00e9", "caf\ufffd"]
