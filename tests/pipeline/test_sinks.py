"""Delta sinks: upsert deletions (Flink's ``RowKind.DELETE``), and the spec's checks."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from epochal import SinkMode, SinkSpec
from epochal.pipeline.sinks import DeltaSink

SCHEMA = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])


def _rows(sink: DeltaSink) -> dict[str, int]:
    return {r.key: r.total for r in sink.read().collect()}


def test_an_upsert_sink_deletes_the_keys_its_input_marks_and_a_replay_changes_nothing(spark, tmp_path):
    sink = DeltaSink(spark, str(tmp_path), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",),
                                                    delete_column="gone"))
    frame = "key string, total long, gone boolean"
    sink.write(spark.createDataFrame([("a", 1, False), ("b", 2, None), ("c", 3, True)], frame), 0)
    assert _rows(sink) == {"a": 1, "b": 2}  # a deletion of a key the sink never held is nothing
    epoch1 = spark.createDataFrame([("a", None, True), ("b", 5, False)], frame)
    assert sink.write(epoch1, 1) == 2  # one update, one deletion
    assert _rows(sink) == {"b": 5}
    assert "gone" not in sink.read().columns
    assert sink.write(epoch1, 1) == 0  # a replayed epoch changes no row
    assert _rows(sink) == {"b": 5}


def test_restoring_a_recorded_version_is_one_commit_and_a_foreign_position_is_refused(spark, tmp_path):
    sink = DeltaSink(spark, str(tmp_path / "wh"), SinkSpec("totals", "s.out", SinkMode.UPSERT, SCHEMA, keys=("key",)))
    sink.write(spark.createDataFrame([("a", 1)], SCHEMA), 0)
    at_zero = sink.position()
    sink.write(spark.createDataFrame([("a", 7), ("b", 1)], SCHEMA), 1)
    other = DeltaSink(spark, str(tmp_path / "elsewhere"), sink.spec)
    assert not other.restore_version(at_zero)  # another deployment's table: rewound by content instead
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
