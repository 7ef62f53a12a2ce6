"""``epochal state read``'s in-process reader (state/delta/rows.py): delta-rs gives the rows Spark gives."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import types as T

from epochal.state.delta.rows import read_rows

SCHEMA = T.StructType([
    T.StructField("key", T.StringType(), False),
    T.StructField("at", T.TimestampType()),
    T.StructField("per_item", T.MapType(T.StringType(), T.DoubleType())),
    T.StructField("sessions", T.ArrayType(T.StructType([
        T.StructField("start", T.TimestampType()), T.StructField("events", T.LongType())]))),
    T.StructField("tags", T.ArrayType(T.StringType())),
])
ROWS = [
    ("a", datetime(2026, 11, 1, 3, 0, 1, 5), {"x": 1.5, "y": None}, [(datetime(2026, 11, 1, 2), 3), None], ["p"]),
    ("b", None, None, None, None),
    ("c", datetime(2026, 11, 2), {}, [], []),
]


def test_rows_of_every_kind_of_column_are_the_ones_spark_reads_at_each_version(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.createDataFrame(ROWS[:1], SCHEMA).write.format("delta").save(path)
    spark.createDataFrame(ROWS[1:], SCHEMA).write.format("delta").mode("append").save(path)

    def by_key(rows):
        return sorted(rows, key=lambda r: r["key"])

    for version in (0, 1, None):
        reader = spark.read.format("delta")
        spark_rows = (reader.option("versionAsOf", version) if version is not None else reader).load(path).collect()
        assert by_key(read_rows(path, version)) == by_key(r.asDict(recursive=True) for r in spark_rows), version
    assert len(read_rows(path, limit=2)) == 2
