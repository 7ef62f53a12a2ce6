"""The copy of a state table version that full checkpoints and savepoints keep (Flink's canonical format):
small tables are copied in process by delta-rs (no JVM), larger ones by Spark; both give the same table."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from epochal.state.checkpoint import snapshots
from epochal.state.delta import io as delta_io
from epochal.state.delta.log import DeltaLog

from tests.support.reliability_checks import Diff, frame_diff


@pytest.fixture(scope="module")
def state_table(spark, tmp_path_factory) -> tuple[str, int]:
    """A state-like table with deletion vectors, NOT NULL, map, struct and timestamp columns and epochal.*
    properties; the version to copy is followed by one more commit (the copy must not see it)."""
    path = str(tmp_path_factory.mktemp("copy") / "source")
    props = {**delta_io.STATE_TABLE_PROPERTIES, "epochal.keyType": '"string"', "epochal.maxParallelism": "128"}
    tblprops = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE delta.`{path}` (key_group INT NOT NULL, key STRING NOT NULL, value MAP<STRING, BIGINT>, "
        f"info STRUCT<n: INT, tag: STRING>, expires_at TIMESTAMP) USING delta TBLPROPERTIES ({tblprops})"
    )
    spark.sql(
        f"INSERT INTO delta.`{path}` SELECT CAST(id % 128 AS INT), CAST(id AS STRING), map('v', id), "
        f"named_struct('n', CAST(id AS INT), 'tag', IF(id % 3 = 0, NULL, 't')), "
        f"IF(id % 2 = 0, NULL, TIMESTAMP'2026-11-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id)) FROM range(500)"
    )
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT CAST(id AS STRING) AS k FROM range(0, 500, 7)) s "
              f"ON t.key = s.k WHEN MATCHED THEN UPDATE SET value = map('u', 1L)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE CAST(key AS INT) % 5 = 0")
    version = DeltaLog(path).latest_version()
    spark.sql(f"DELETE FROM delta.`{path}` WHERE CAST(key AS INT) % 2 = 0")  # after the copied version
    assert any(f.dv_path for f in DeltaLog(path).snapshot(version).files), "the source has deletion vectors"
    return path, version


@pytest.mark.parametrize("engine", ["delta-rs", "spark"])
def test_a_copy_holds_the_version_with_its_schema_and_properties_and_opens_anywhere(
    spark, state_table, tmp_path, monkeypatch, engine
):
    path, version = state_table
    if engine == "spark":  # a table over the in-process limit
        monkeypatch.setattr(snapshots, "IN_PROCESS_COPY_MAX_BYTES", 0)
    snapshot = DeltaLog(path).snapshot(version)
    target = str(tmp_path / "copy")
    snapshots.copy_table_version(spark, path, snapshot, target, rows=snapshot.rows)

    original = spark.read.format("delta").option("versionAsOf", version).load(path)
    copied = spark.read.format("delta").load(target)
    assert copied.schema == original.schema
    assert json.loads(DeltaLog(target).snapshot(DeltaLog(target).latest_version()).schema_json) == json.loads(snapshot.schema_json)
    assert frame_diff(copied, original) == Diff(lost=0, extra=0)
    assert copied.count() == snapshot.rows == 400
    properties = delta_io.table_properties(target)
    assert properties["epochal.keyType"] == '"string"' and properties["epochal.maxParallelism"] == "128"
    assert properties["delta.enableDeletionVectors"] == "false"

    table = DeltaTable(target)  # the canonical form: reader version 1, no deletion vectors
    assert table.protocol().min_reader_version == 1
    assert table.to_pyarrow_table().num_rows == 400
    engines = {entry.get("engineInfo", "") for entry in table.history()}
    assert all(e.startswith("delta-rs") for e in engines) == (engine == "delta-rs"), engines


def test_an_empty_version_is_copied_as_an_empty_table(spark, tmp_path):
    source = str(tmp_path / "empty")
    spark.sql(f"CREATE TABLE delta.`{source}` (key STRING NOT NULL, value BIGINT) USING delta")
    snapshot = DeltaLog(source).snapshot(0)
    target = str(tmp_path / "copy")
    snapshots.copy_table_version(spark, source, snapshot, target, rows=0)
    assert DeltaLog(target).latest_version() == 0
    assert spark.read.format("delta").load(target).schema == spark.read.format("delta").load(source).schema
