"""An empty table's version 0 written from the Delta log (``epochal.state.delta.create``) against Delta's own.

The commit must be the one Delta's ``createIfNotExists`` writes, but for the ids and timestamps: the same
protocol, schema and properties, for the tables epochal creates (state tables, deletion vectors on; sinks and
savepoint copies, off). Delta then writes, merges and enforces NOT NULL on top, delta-rs opens it, and a table
that exists is left alone. Where the protocol is not known here (a type or property that needs a table feature,
a session default of Delta's, a folder holding files), Delta's own create runs and says what it thinks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import types as T

from epochal.state.delta import io as delta_io
from epochal.state.delta.create import create_commit
from epochal.state.delta.tables import create_table

SCHEMA = T.StructType([
    T.StructField("key", T.StringType()), T.StructField("amount", T.DecimalType(12, 2)),
    T.StructField("at", T.TimestampType()), T.StructField("tags", T.MapType(T.StringType(), T.ArrayType(T.LongType()))),
    T.StructField("nested", T.StructType([T.StructField("n", T.IntegerType())])),
    T.StructField("_epoch", T.LongType(), False),
])
STATE = {**delta_io.STATE_TABLE_PROPERTIES, "epochal.stateType": "value"}
SINK = {**delta_io.PORTABLE_TABLE_PROPERTIES, "epochal.sinkMode": "append"}


def _version_zero(path: Path) -> dict[str, dict]:
    lines = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    return {name: body for line in lines for name, body in json.loads(line).items()}


def _deltas_own(spark, path: Path, schema: T.StructType, properties: dict[str, str]) -> None:
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(schema)
    for key, value in properties.items():
        builder = builder.property(key, value)
    builder.execute()


def _comparable(actions: dict[str, dict]) -> tuple:
    meta = actions["metaData"]
    return (actions["protocol"], meta["schemaString"], meta["configuration"], meta["partitionColumns"], meta["format"],
            actions["commitInfo"]["operation"], json.loads(actions["commitInfo"]["operationParameters"]["properties"]))


@pytest.mark.parametrize("properties", [STATE, SINK, {}], ids=["state-table", "sink", "no-properties"])
def test_the_commit_is_the_one_deltas_create_writes(spark, tmp_path, properties):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    create_table(spark, str(ours), SCHEMA, dict(properties))
    _deltas_own(spark, theirs, SCHEMA, properties)
    written = _version_zero(ours)
    assert written["commitInfo"]["engineInfo"].startswith("epochal"), "written from the log, not by Delta"
    assert _comparable(written) == _comparable(_version_zero(theirs))
    assert delta_io.table_properties(str(ours)) == properties


def test_delta_writes_merges_and_enforces_not_null_on_it_and_delta_rs_opens_it(spark, tmp_path):
    from delta.tables import DeltaTable
    from deltalake import DeltaTable as DeltaRs

    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType(), False)])
    create_table(spark, path, schema, dict(SINK))
    spark.createDataFrame([("a", 1), ("b", 2)], schema).write.format("delta").mode("append").save(path)
    changes = spark.createDataFrame([("a", 10), ("c", 3)], schema)
    DeltaTable.forPath(spark, path).alias("t").merge(changes.alias("s"), "t.k = s.k") \
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert sorted(map(tuple, spark.read.format("delta").load(path).collect())) == [("a", 10), ("b", 2), ("c", 3)]
    with pytest.raises(Exception, match="NOT NULL"):
        spark.createDataFrame([("z", None)], "k STRING, v BIGINT").write.format("delta").mode("append").save(path)
    assert sorted(DeltaRs(path).to_pyarrow_table().to_pylist(), key=lambda r: r["k"])[0] == {"k": "a", "v": 10}
    assert [r.operation for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()][-1] == "CREATE TABLE"


def _jobs_of(spark, action) -> int:
    context = spark.sparkContext
    context.setJobGroup("create-commit-probe", "probe")
    before = set(context.statusTracker().getJobIdsForGroup("create-commit-probe"))
    action()
    context.setJobGroup("", "")
    return len(set(context.statusTracker().getJobIdsForGroup("create-commit-probe")) - before)


@pytest.mark.parametrize("properties", [STATE, SINK], ids=["state-table", "sink"])
def test_the_first_append_and_merge_cost_the_spark_jobs_they_cost_on_deltas_own_table(spark, tmp_path, properties):
    """Version 0's checksum file spares Delta the state reconstruction of a table it did not create itself."""
    from delta.tables import DeltaTable

    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType(), False)])
    rows = spark.createDataFrame([("a", 1), ("b", 2)], schema)
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    create_table(spark, ours, schema, dict(properties))
    _deltas_own(spark, Path(theirs), schema, properties)
    assert (Path(ours) / "_delta_log" / f"{0:020d}.crc").exists()

    def append(path):
        return lambda: rows.write.format("delta").mode("append").save(path)

    def merge(path):
        return lambda: (DeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), "t.k = s.k")
                        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    assert _jobs_of(spark, append(ours)) == _jobs_of(spark, append(theirs))
    assert _jobs_of(spark, merge(ours)) == _jobs_of(spark, merge(theirs))
    assert spark.read.format("delta").load(ours).count() == 2


def test_an_existing_table_is_left_alone(spark, tmp_path):
    path = tmp_path / "t"
    create_table(spark, str(path), SCHEMA, dict(STATE))
    first = _version_zero(path)["metaData"]["id"]
    assert create_commit(path.as_uri(), SCHEMA.json(), {"delta.enableDeletionVectors": "false"}) is True
    create_table(spark, str(path), SCHEMA, dict(SINK))
    assert _version_zero(path)["metaData"]["id"] == first
    assert sorted(p.name for p in (path / "_delta_log").glob("*.json")) == [f"{0:020d}.json"]


@pytest.mark.parametrize("schema, properties, conf", [
    (T.StructType([T.StructField("at", T.TimestampNTZType())]), {}, {}),
    (T.StructType([T.StructField("k", T.StringType(), metadata={"comment": "the key"})]), {}, {}),
    (T.StructType([T.StructField("k", T.StringType())]), {"delta.appendOnly": "true"}, {}),
    (T.StructType([T.StructField("k", T.StringType())]), {},
     {"spark.databricks.delta.properties.defaults.appendOnly": "true"}),
], ids=["timestamp-ntz", "a-comment", "append-only", "a-session-default"])
def test_what_needs_deltas_judgement_goes_to_delta(spark, tmp_path, schema, properties, conf):
    path = tmp_path / "t"
    assert create_commit(path.as_uri(), schema.json(), properties, conf) is False
    assert not path.exists(), "nothing written when Delta must decide"
    if not conf:  # (the test session has no such default: create_table would write it from the log)
        create_table(spark, str(path), schema, dict(properties))
        assert "Apache-Spark" in _version_zero(path)["commitInfo"]["engineInfo"]


def test_a_column_named_twice_is_refused_by_delta_not_written(spark, tmp_path):
    path = tmp_path / "t"
    schema = T.StructType([T.StructField("user", T.StringType()), T.StructField("User", T.LongType())])
    assert create_commit(path.as_uri(), schema.json(), dict(SINK)) is False
    with pytest.raises(Exception, match="COLUMN_ALREADY_EXISTS"):  # Delta says so, and writes nothing
        create_table(spark, str(path), schema, dict(SINK))
    assert not (path / "_delta_log" / f"{0:020d}.json").exists()


def test_a_folder_already_holding_files_goes_to_delta(spark, tmp_path):
    path = tmp_path / "t"
    path.mkdir()
    (path / "stray.parquet").write_bytes(b"not a table")
    assert create_commit(path.as_uri(), SCHEMA.json(), dict(SINK)) is False
    assert not (path / "_delta_log").exists()
