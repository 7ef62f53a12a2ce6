"""State reads of a pinned version: straight from the parquet files the Delta log lists, where that reads the same.

Every version of a table with appends, deletes (deletion vectors), a MERGE, an OPTIMIZE and V2
checkpoints reads the same rows through ``read_version`` as through Delta's ``versionAsOf``; the
versions whose live files carry deletion vectors, and partitioned tables, go through Delta.
"""

from __future__ import annotations

from pathlib import Path

from epochal.state.delta import io as delta_io
from epochal.state.delta.log import DeltaLog

from tests.state.delta.test_log import append, build_table, create


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def delta_rows(spark, path: Path, version: int) -> list[tuple]:
    return rows(spark.read.format("delta").option("versionAsOf", version).load(str(path)))


def test_every_version_reads_as_delta_reads_it_and_deletion_vectors_go_through_delta(spark, tmp_path) -> None:
    path = tmp_path / "t"
    build_table(spark, path)
    log = DeltaLog(str(path))
    direct = []
    for version in range(log.latest_version() + 1):
        files = log.snapshot(version).files
        with_dvs = any(f.has_deletion_vector for f in files)
        plain = delta_io.read_files(spark, str(path), version)
        assert (plain is None) == with_dvs, f"version {version}: deletion vectors {with_dvs}, read directly {plain is not None}"
        if plain is not None:
            direct.append(version)
            assert len(plain.inputFiles()) == len(files), f"version {version} reads other files than its log lists"
        assert rows(delta_io.read_version(spark, str(path), version)) == delta_rows(spark, path, version), version
    assert direct[:3] == [0, 1, 2]  # before the first DELETE: read as parquet files
    assert 7 in direct  # OPTIMIZE rewrote the files without their deletion vectors


def test_a_pinned_read_keeps_its_version_after_later_writes(spark, tmp_path) -> None:
    path = tmp_path / "t"
    create(spark, path)
    append(spark, path, 0, 10)
    pinned = delta_io.read_pinned(spark, str(path))
    empty = delta_io.read_pinned(spark, str(path), 0)
    append(spark, path, 10, 25)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE k < 5")
    assert pinned.count() == 10 and rows(pinned) == delta_rows(spark, path, 1)
    assert empty.count() == 0 and empty.schema.fieldNames() == ["k", "v"]


def test_a_partitioned_table_is_read_through_delta(spark, tmp_path) -> None:
    path = tmp_path / "p"
    spark.range(6).selectExpr("id AS k", "id % 2 AS part").write.format("delta").partitionBy("part").save(str(path))
    assert delta_io.read_files(spark, str(path), 0) is None
    assert rows(delta_io.read_version(spark, str(path), 0)) == delta_rows(spark, path, 0)
