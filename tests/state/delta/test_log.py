"""The fsspec replay of the Delta log (``epochal.state.delta.log``) against independent readers.

Spark writes a table the way Delta 4 does for keyed state: deletion vectors, V2 checkpoints
(``delta.checkpointPolicy=v2``) every 3 commits with JSON and parquet top-level files and
several sidecars; delta-rs adds a log compaction and a classic checkpoint. For every version
the replay's data files (paths, sizes, live rows) are compared with delta-rs
(``get_add_actions`` and its materialised deletion vectors) and with Delta's JVM snapshot
(``allFiles``, whose deletion-vector descriptors give the absolute paths delta-rs does not
expose). Then the log loses files: commits before a checkpoint (by hand, and by Delta's own
log cleanup, which also writes the classic-named V2 compatibility checkpoint), commits that
only a compaction still covers, a sidecar.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from epochal.state.delta.checkpoints import CHECKPOINT_COST, Compaction, LogListing, plan_replay
from epochal.state.delta.log import DeltaLog, VersionSnapshot
from epochal.state.errors import SnapshotUnavailable

PROPERTIES = {
    "delta.enableDeletionVectors": "true",
    "delta.checkpointPolicy": "v2",
    "delta.checkpointInterval": "3",
}
TOP_LEVEL_FORMAT = "spark.databricks.delta.checkpointV2.topLevelFileFormat"
PART_SIZE = "spark.databricks.delta.checkpoint.partSize"  # actions per sidecar file


# ----------------------------------------------------------------------------- building tables


@contextlib.contextmanager
def session_conf(spark, **settings: str) -> Iterator[None]:
    """Spark confs set for the duration (the session is shared by the whole test run)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def create(spark, path: Path, **extra: str) -> None:
    props = ", ".join(f"'{k}' = '{v}'" for k, v in {**PROPERTIES, **extra}.items())
    spark.sql(f"CREATE TABLE delta.`{path}` (k BIGINT, v STRING) USING delta TBLPROPERTIES ({props})")


def append(spark, path: Path, start: int, end: int) -> None:
    spark.sql(f"INSERT INTO delta.`{path}` SELECT id AS k, CAST(id AS STRING) AS v FROM range({start}, {end}, 1, 2)")


def build_table(spark, path: Path) -> None:
    """Versions 0-13: appends, deletes, a MERGE, an OPTIMIZE, an UPDATE (checkpoints at 3, 6, 9, 12)."""
    sql = spark.sql
    create(spark, path)  # 0
    append(spark, path, 0, 20)  # 1
    append(spark, path, 20, 40)  # 2
    sql(f"DELETE FROM delta.`{path}` WHERE k % 4 = 0")  # 3: deletion vectors; V2 checkpoint, JSON top level
    sql(f"""MERGE INTO delta.`{path}` t USING (SELECT id AS k, 'm' AS v FROM range(5, 45)) s ON t.k = s.k
            WHEN MATCHED AND t.k < 12 THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""")  # 4
    append(spark, path, 100, 120)  # 5
    with session_conf(spark, **{TOP_LEVEL_FORMAT: "parquet"}):
        sql(f"DELETE FROM delta.`{path}` WHERE k % 5 = 1")  # 6: parquet top level
    sql(f"OPTIMIZE delta.`{path}`")  # 7
    sql(f"DELETE FROM delta.`{path}` WHERE k BETWEEN 30 AND 33")  # 8
    with session_conf(spark, **{PART_SIZE: "3"}):
        sql(f"UPDATE delta.`{path}` SET v = 'u' WHERE k % 7 = 0")  # 9: several sidecars
    append(spark, path, 200, 210)  # 10
    sql(f"DELETE FROM delta.`{path}` WHERE k = 201")  # 11
    with session_conf(spark, **{TOP_LEVEL_FORMAT: "parquet", PART_SIZE: "4"}):
        append(spark, path, 300, 305)  # 12
    sql(f"DELETE FROM delta.`{path}` WHERE k = 300")  # 13


def add_delta_rs_files(path: Path) -> None:
    """A log compaction of commits 7-8 and a classic checkpoint of version 13, written by delta-rs."""
    from deltalake import DeltaTable

    table = DeltaTable(f"file://{path}")
    table.compact_logs(7, 8)
    table.create_checkpoint()


def log_names(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path / "_delta_log") if not n.startswith("."))


def sidecars(path: Path, version: int) -> list[Path]:
    folder = path / "_delta_log" / "_sidecars"
    return sorted(folder / n for n in os.listdir(folder) if n.startswith(f"{version:020d}.checkpoint."))


# ----------------------------------------------------------------------------- independent views

# A view of a version: data file (table-relative) -> (size, live rows, deletion-vector file URL or None).
View = dict[str, tuple[int, "int | None", "str | None"]]


def replay_view(snapshot: VersionSnapshot, table_url: str) -> View:
    return {f.path: (f.size, f.records, f.dv_path and f"{table_url}/{f.dv_path}") for f in snapshot.files}


def spark_view(spark, path: Path, version: int) -> tuple[View, str, dict[str, str]]:
    """Delta's own snapshot (JVM): files, deletion-vector paths, live rows; schema and properties."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))
    snapshot = log.getSnapshotAt(version, jvm.scala.Option.empty(), jvm.scala.Option.empty(), False)
    location = jvm.org.apache.hadoop.fs.Path(str(path))
    view: View = {}
    for add in snapshot.allFiles().collectAsList():
        dv = add.deletionVector()
        dv_url = None if dv is None or dv.isInline() else "file://" + dv.absolutePath(location).toUri().getPath()
        rows = add.numLogicalRecords()
        view[unquote(add.path())] = (int(add.size()), int(rows.get()) if rows.isDefined() else None, dv_url)
    metadata = snapshot.metadata()
    config = jvm.scala.collection.JavaConverters.mapAsJavaMap(metadata.configuration())
    return view, str(metadata.schemaString()), {str(k): str(v) for k, v in dict(config).items()}


def delta_rs_view(path: Path, version: int) -> tuple[dict[str, tuple[int, int]], dict[str, str], list[str]]:
    """delta-rs: data files (size, rows its deletion vectors keep), properties, column names."""
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(f"file://{path}", version=version)
    assert table.version() == version
    adds = pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes", "num_records"]).to_pylist()
    masks = {unquote(r["filepath"]): r["selection_vector"] for r in pa.table(table.deletion_vectors()).to_pylist()}
    files = {}
    for add in adds:
        deleted = masks.get(f"file://{path}/{add['path']}", []).count(False)
        files[add["path"]] = (int(add["size_bytes"]), int(add["num_records"]) - deleted)
    columns = [f["name"] for f in json.loads(table.schema().to_json())["fields"]]
    return files, dict(table.metadata().configuration), columns


def assert_matches_delta(spark, path: Path, snapshot: VersionSnapshot, table_url: str) -> None:
    ours = replay_view(snapshot, table_url)
    theirs, schema_json, config = spark_view(spark, path, snapshot.version)
    assert ours == theirs, f"version {snapshot.version}: the replay differs from Delta's snapshot"
    assert (snapshot.schema_json, dict(snapshot.configuration)) == (schema_json, config)
    rs_files, rs_config, rs_columns = delta_rs_view(path, snapshot.version)
    assert {p: (size, rows) for p, (size, rows, _) in ours.items()} == rs_files, f"version {snapshot.version}"
    assert dict(snapshot.configuration) == rs_config and snapshot.schema.fieldNames() == rs_columns
    referenced = {dv for _, _, dv in ours.values() if dv}
    assert referenced <= {f.as_uri() for f in path.glob("deletion_vector_*.bin")}
    assert snapshot.physical_files == set(ours) | {dv[len(table_url) + 1:] for dv in referenced}


# ----------------------------------------------------------------------------- tests


@pytest.mark.slow
def test_replay_matches_delta_and_delta_rs_at_every_version(spark, tmp_path) -> None:
    path = tmp_path / "t"
    build_table(spark, path)
    add_delta_rs_files(path)
    names = log_names(path)
    assert any(n.startswith("00000000000000000003.checkpoint.") and n.endswith(".json") for n in names)
    assert any(n.startswith("00000000000000000006.checkpoint.") and n.endswith(".parquet") for n in names)
    assert len(sidecars(path, 9)) > 1, "checkpoint 9 has its file actions in several sidecars"
    assert f"{7:020d}.{8:020d}.compacted.json" in names and f"{13:020d}.checkpoint.parquet" in names

    url = f"file://{path}"
    expected = DeltaLog(url).snapshots(range(14))
    assert sum(1 for s in expected.values() for f in s.files if f.dv_path) > 5, "deletion vectors were written"
    for version in range(14):
        assert_matches_delta(spark, path, expected[version], url)
        assert DeltaLog(url).snapshot(version) == expected[version], "one version alone = the same in one replay"

    check_commits_before_a_checkpoint_deleted(tmp_path, path, expected)
    check_compaction_bridges_deleted_commits(tmp_path, path, expected)


def check_commits_before_a_checkpoint_deleted(tmp_path: Path, source: Path, expected: dict) -> None:
    copy = shutil.copytree(source, tmp_path / "no-early-commits")
    for version in range(6):
        (copy / "_delta_log" / f"{version:020d}.json").unlink()
    log = DeltaLog(str(copy))
    got = log.snapshots([3, *range(6, 14)])  # 3 and 6 from their checkpoints
    assert {v: s.files for v, s in got.items()} == {v: expected[v].files for v in got}
    for version in (0, 1, 2, 4, 5):
        first_gone = 0 if version < 3 else 4
        message = f"no longer covers version {version}: commit {first_gone} is missing"
        with pytest.raises(SnapshotUnavailable, match=message):
            log.snapshot(version)
    with pytest.raises(SnapshotUnavailable) as raised:
        log.snapshots([2, 9])
    assert raised.value.action and raised.value.context.get("version") == 2


def check_compaction_bridges_deleted_commits(tmp_path: Path, source: Path, expected: dict) -> None:
    copy = shutil.copytree(source, tmp_path / "compacted")
    for version in (7, 8):
        (copy / "_delta_log" / f"{version:020d}.json").unlink()
    log = DeltaLog(str(copy))
    assert log.snapshot(8).files == expected[8].files, "checkpoint 6 and the compaction of 7-8"
    assert log.snapshots([6, 8, 11])[11].files == expected[11].files
    with pytest.raises(SnapshotUnavailable, match="no longer covers version 7"):
        log.snapshot(7)


@pytest.mark.slow
def test_replay_after_deltas_own_log_cleanup(spark, tmp_path) -> None:
    """Delta deletes expired commits and checkpoints, and writes the classic-named V2 checkpoint."""
    path, url = tmp_path / "t", f"file://{tmp_path / 't'}"
    before, boundary = build_and_clean_up(spark, path)
    names = log_names(path)
    assert f"{0:020d}.json" not in names and f"{boundary:020d}.json" in names, names
    compat = [int(n[:20]) for n in names if n.endswith(".checkpoint.parquet")]
    assert len(compat) == 1, f"one V2 compatibility checkpoint (classic name, sidecars): {names}"

    log = DeltaLog(url)
    newest = log.latest_version()
    after = log.snapshots(range(boundary, newest + 1))
    assert {v: after[v] for v in before if v >= boundary} == {v: before[v] for v in before if v >= boundary}
    for version in sorted({boundary, compat[0], newest}):
        assert_matches_delta(spark, path, after[version], url)
    for version in range(boundary):
        with pytest.raises(SnapshotUnavailable, match=f"no longer covers version {version}"):
            log.snapshot(version)

    for name in names:  # only the compatibility checkpoint remains at its version
        if name.startswith(f"{compat[0]:020d}.checkpoint.") and not name.endswith(".checkpoint.parquet"):
            (path / "_delta_log" / name).unlink()
    assert log.snapshot(compat[0]) == after[compat[0]]
    assert replay_view(log.snapshot(compat[0]), url) == spark_view(spark, path, compat[0])[0]

    for sidecar in sidecars(path, boundary):
        sidecar.unlink()
    with warnings_of("epochal.state.delta.log") as messages:
        with pytest.raises(SnapshotUnavailable, match=f"no longer covers version {boundary}"):
            log.snapshot(boundary)
    assert any("unreadable Delta checkpoint" in m for m in messages)
    assert log.snapshot(newest) == after[newest]


def build_and_clean_up(spark, path: Path) -> tuple[dict[int, VersionSnapshot], int]:
    """Versions 0-11 (checkpoints at 3, 6, 9), then Delta's log cleanup once those before 6 are
    three days old; return the replay's snapshots before the cleanup, and the first version kept."""
    day = "interval 1 days"
    create(spark, path, **{"delta.logRetentionDuration": day, "delta.deletedFileRetentionDuration": day})
    for start in range(0, 70, 10):
        append(spark, path, start, start + 10)
        if start % 20 == 0:
            spark.sql(f"DELETE FROM delta.`{path}` WHERE k % 3 = 0 AND k < {start + 10}")
    log = DeltaLog(str(path))
    before = log.snapshots(range(log.latest_version() + 1))
    boundary = max(v for v in range(log.latest_version() - 3) if v % 3 == 0)  # a checkpoint before the newest
    backdate(path, below=boundary)
    append(spark, path, 500, 510)
    while log.latest_version() % 3:
        append(spark, path, 600, 601)  # up to the next checkpoint, whose writing runs the cleanup
    return before, boundary


@contextlib.contextmanager
def warnings_of(logger: str) -> Iterator[list[str]]:
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(logger).addHandler(handler)
    try:
        yield messages
    finally:
        logging.getLogger(logger).removeHandler(handler)


def backdate(path: Path, below: int) -> None:
    """Make the log files of versions before ``below`` (and the sidecars they use) three days old."""
    old = time.time() - 3 * 86400
    log = path / "_delta_log"
    for file in [*log.iterdir(), *(log / "_sidecars").iterdir()]:
        digits = file.name.lstrip(".")[:20]
        if file.is_file() and digits.isdigit() and int(digits) < below:
            os.utime(file, (old, old))


# ----------------------------------------------------------------------------- planning (no Spark)


def listing(commits, checkpoints=(), compactions=()) -> LogListing:
    from epochal.state.delta.checkpoints import Checkpoint

    return LogListing(
        set(commits), {v: [Checkpoint(v, "uuid", (f"{v}.cp",))] for v in checkpoints},
        [Compaction(a, b, f"{a}.{b}") for a, b in compactions],
    )


def kinds(steps) -> list[tuple[int, str]]:
    return [(s.version, s.kind) for s in steps]


def test_plan_starts_from_the_newest_checkpoint_and_jumps_only_when_cheaper() -> None:
    log = listing(range(40), checkpoints=(10, 20, 30))
    assert kinds(plan_replay(log, [12])) == [(10, "checkpoint"), (11, "commit"), (12, "commit")]
    assert kinds(plan_replay(log, [5])) == [(v, "commit") for v in range(6)]
    far = plan_replay(log, [12, 35])
    assert kinds(far)[:3] == [(10, "checkpoint"), (11, "commit"), (12, "commit")]
    assert (30, "checkpoint") in kinds(far) and (20, "checkpoint") not in kinds(far)
    near = plan_replay(log, [12, 21])
    assert [v for v, k in kinds(near) if k == "checkpoint"] == [10], f"{CHECKPOINT_COST} > 9 commits"
    assert kinds(plan_replay(log, [12, 35], unreadable=[10, 30]))[0] == (0, "commit")


def test_plan_uses_compactions_only_where_commits_are_gone() -> None:
    full = listing(range(10), checkpoints=(3,), compactions=[(4, 7)])
    assert "compaction" not in {k for _, k in kinds(plan_replay(full, [9]))}
    gaps = listing(set(range(10)) - {5, 6}, checkpoints=(3,), compactions=[(4, 7)])
    assert kinds(plan_replay(gaps, [9])) == [(3, "checkpoint"), (7, "compaction"), (8, "commit"), (9, "commit")]
    from epochal.state.delta.checkpoints import LogGap

    with pytest.raises(LogGap) as gap:
        plan_replay(gaps, [5, 9])  # version 5 sits inside the compaction
    assert gap.value.version == 5


def test_listing_sorts_out_the_log_files_by_kind() -> None:
    from epochal.state.delta.checkpoints import parse_listing

    v = "{:020d}".format
    found = parse_listing([
        f"{v(0)}.json", f"{v(1)}.json", f"{v(1)}.crc", f".{v(1)}.json.crc", "_last_checkpoint", "_sidecars",
        f"{v(2)}.checkpoint.parquet", f"{v(2)}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
        f"{v(2)}.checkpoint.0000000001.0000000002.parquet", f"{v(2)}.checkpoint.0000000002.0000000002.parquet",
        f"{v(3)}.checkpoint.0000000001.0000000002.parquet",  # incomplete: ignored
        f"{v(4)}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.parquet", f"{v(3)}.{v(5)}.compacted.json",
        f".{v(6)}.checkpoint.parquet.1f0e.tmp",
    ])
    assert found.commits == {0, 1} and found.latest == 5
    assert [c.kind for c in found.checkpoints[2]] == ["uuid", "multi-part", "classic"]
    assert set(found.checkpoints) == {2, 4} and found.checkpoints[4][0].kind == "uuid"
    assert [(c.start, c.end) for c in found.compactions] == [(3, 5)]
