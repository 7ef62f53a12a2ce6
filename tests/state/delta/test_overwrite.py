"""An overwrite committed through Delta's transaction API with the replay's removes reads as Delta's own would."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from epochal.state.delta import io as delta_io
from epochal.state.delta.log import DeltaLog
from epochal.state.delta.overwrite import overwrite, remove_json
from epochal.state.delta.paths import to_url
from epochal.state.errors import StateSchemaError


def _table(spark, path: str, *, deletion_vectors: bool) -> None:
    spark.range(6).selectExpr("id AS key", "id * 10 AS value").coalesce(1).write.format("delta").option(
        "delta.enableDeletionVectors", str(deletion_vectors).lower()
    ).save(path)
    spark.range(6, 9).selectExpr("id AS key", "id * 10 AS value").write.format("delta").mode("append").save(path)


def _rows(spark, path: str) -> list[tuple[int, int]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _last_commit(path: str) -> list[dict]:
    return delta_io.commit_actions(path, DeltaLog(path).latest_version())


def test_every_live_file_goes_even_one_a_deletion_vector_marks(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, deletion_vectors=True)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE key = 2")  # a deletion vector on the first file
    before = DeltaLog(path).snapshot(DeltaLog(path).latest_version())
    assert any(f.has_deletion_vector for f in before.files)

    version = overwrite(spark, path, lambda snap: spark.createDataFrame([(1, 7), (40, 400)], "key long, value long"))

    assert _rows(spark, path) == [(1, 7), (40, 400)]
    actions = _last_commit(path)
    assert version == before.version + 1
    removed = [a["remove"] for a in actions if "remove" in a]
    assert {(r["path"], bool(r.get("deletionVector"))) for r in removed} == {
        (f.action["path"], f.has_deletion_vector) for f in before.files
    }
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert (info["operation"], info["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    after = DeltaLog(path).snapshot(version)
    assert after.rows == 2 and not (after.physical_files & before.physical_files)


def test_the_removes_come_from_a_parquet_checkpoint_as_well(spark, tmp_path):
    """Past Delta's checkpoint (every tenth commit) the replay reads the live files from parquet, maps as pairs."""
    path = str(tmp_path / "t")
    _table(spark, path, deletion_vectors=False)
    for n in range(12):
        overwrite(spark, path, lambda snap, n=n: delta_io.read_version(spark, path, snap.version, snapshot=snap)
                  .select("key", (F.col("value") + n).alias("value")))
        log = DeltaLog(path)
        assert sorted(to_url(f) for f in spark.read.format("delta").load(path).inputFiles()) == sorted(
            log.physical_url(f.path) for f in log.snapshot(log.latest_version()).files
        )
    assert any(name.endswith(".checkpoint.parquet") for name in DeltaLog(path).fs.ls(f"{tmp_path}/t/_delta_log", detail=False))
    assert _rows(spark, path) == [(k, k * 10 + sum(range(12))) for k in range(9)]


def test_a_stale_snapshot_is_replayed_at_the_version_the_transaction_reads(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, deletion_vectors=False)
    stale = DeltaLog(path).snapshot(DeltaLog(path).latest_version())
    spark.range(100, 102).selectExpr("id AS key", "id AS value").write.format("delta").mode("append").save(path)
    seen = []

    def build(snap):
        seen.append(snap.version)
        return delta_io.read_version(spark, path, snap.version, snapshot=snap)

    overwrite(spark, path, build, snapshot=stale)

    assert seen == [stale.version + 1]
    assert [k for k, _ in _rows(spark, path)] == [*range(9), 100, 101]


def test_rows_without_the_tables_columns_are_refused_before_anything_is_written(spark, tmp_path):
    path = str(tmp_path / "t")
    _table(spark, path, deletion_vectors=False)
    version = DeltaLog(path).latest_version()
    with pytest.raises(StateSchemaError, match=r"value int instead of key bigint, value bigint") as caught:
        overwrite(spark, path, lambda snap: spark.createDataFrame([(1,)], "value int"))
    assert caught.value.context["path"] == path
    assert DeltaLog(path).latest_version() == version


def test_a_remove_from_a_checkpoint_row_is_delta_shaped():
    add = {"path": "part-1.parquet", "size": 10, "partitionValues": [("dt", "2026-11-01")], "tags": None,
           "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab", "offset": None, "sizeInBytes": 3,
                              "cardinality": 1, "maxRowIndex": None}, "stats": '{"numRecords":2}'}
    remove = json.loads(remove_json(add, 5))["remove"]
    assert remove == {
        "path": "part-1.parquet", "deletionTimestamp": 5, "dataChange": True, "extendedFileMetadata": True,
        "partitionValues": {"dt": "2026-11-01"}, "size": 10, "stats": '{"numRecords":2}',
        "deletionVector": {"storageType": "u", "pathOrInlineDv": "ab", "sizeInBytes": 3, "cardinality": 1},
    }
