"""Checks the reliability tests share: table diffs, orphaned files, a consistent checkpoint list.

Table contents are compared in Spark (``exceptAll`` both ways: multisets), never
collected. Orphans are judged from the Delta logs and the completed-checkpoint
store independently of :mod:`epochal.state.checkpoint.retention`: a data or deletion-vector file
in a working table that neither the table's current version nor a version that
a retained checkpoint or savepoint references holds is orphaned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from epochal.state.checkpoint.resolve import CheckpointResolver
from epochal.state.delta.log import DeltaLog, working_tables
from epochal.state.delta.paths import resolve_table_url, to_spark


@dataclass(frozen=True)
class Diff:
    lost: int  # rows of the clean run missing here
    extra: int  # rows here the clean run does not have (duplicates included)


def table_diff(spark, actual: str, clean: str) -> Diff:
    """Multiset difference of two Delta tables' current rows (same columns)."""
    a = spark.read.format("delta").load(to_spark(actual))
    c = spark.read.format("delta").load(to_spark(clean)).select(*a.columns)
    return Diff(lost=c.exceptAll(a).count(), extra=a.exceptAll(c).count())


def frame_diff(actual, clean) -> Diff:
    """Multiset difference of two DataFrames with the same columns, rows compared as JSON (so map columns,
    which ``exceptAll`` refuses, compare too; a map's entries in another order count as another row)."""
    from pyspark.sql import functions as F

    def as_json(frame):
        return frame.select(F.to_json(F.struct(*actual.columns)).alias("row"))

    a, c = as_json(actual), as_json(clean)
    return Diff(lost=c.exceptAll(a).count(), extra=a.exceptAll(c).count())


def deployment_tables(runner) -> dict[str, str]:
    """Every sink and working state table of a deployment: ``sink:<name>`` / ``state:<stage>/<state>`` -> URL."""
    d = runner.d
    tables = {f"sink:{name}": sink.path for name, sink in d.sinks.items()}
    for stage, state, url in working_tables(d.storage.shared_url):
        tables[f"state:{stage}/{state}"] = url
    return tables


def compare_deployments(spark, actual, clean) -> dict[str, Diff]:
    """Per sink and state table: rows lost and extra in ``actual`` against ``clean``."""
    mine, theirs = deployment_tables(actual), deployment_tables(clean)
    assert set(mine) == set(theirs), f"tables differ: {sorted(set(mine) ^ set(theirs))}"
    return {name: table_diff(spark, mine[name], theirs[name]) for name in sorted(mine)}


def orphaned_files(runner) -> tuple[list[str], list[str]]:
    """(orphaned, missing) files of the working tables, as ``<table>/<file>``."""
    d = runner.d
    needed: dict[str, set[int]] = {}
    for entry in d.coordinator.store.all():
        for handle in entry.handles:
            needed.setdefault(resolve_table_url(handle, entry.metadata_path), set()).add(handle.version)
    orphaned, missing = [], []
    for _stage, _state, url in working_tables(d.storage.shared_url):
        table = DeltaLog(url)
        versions = {table.latest_version(), *needed.get(url, ())}
        keep = {f for snap in table.snapshots(versions).values() for f in snap.physical_files}
        on_disk = {f for files in table.files_on_disk().values() for f in files}
        on_disk = {f for f in on_disk if not f.endswith(".crc")}
        orphaned += [f"{url}/{f}" for f in sorted(on_disk - keep)]
        missing += [f"{url}/{f}" for f in sorted(keep - on_disk)]
    return orphaned, missing


def stray_folders(runner) -> list[str]:
    """``chk-<id>`` folders of no retained checkpoint; savepoint folders without a committed ``_metadata``."""
    d = runner.d
    retained = {int(e.checkpoint_id) for e in d.coordinator.store.all()}
    stray = [url for cid, url in d.storage.list_checkpoint_dirs() if int(cid) not in retained]
    committed = {e.metadata_path.rsplit("/", 1)[0] for e in d.coordinator.store.all() if e.is_savepoint}
    for name in d.storage.list_savepoints():
        folder = d.storage.savepoint_dir(name)
        if folder not in committed:
            stray.append(folder)
    return stray


def checkpoint_list_problems(runner) -> list[str]:
    """What is wrong with the retained checkpoints: order, count, unreadable ``_metadata``."""
    d = runner.d
    store = d.coordinator.store
    problems = []
    checkpoints = [e for e in store.all() if not e.is_savepoint]
    ids = [int(e.checkpoint_id) for e in checkpoints]
    epochs = [int(e.metadata.epoch) for e in checkpoints]
    if ids != sorted(set(ids)) or epochs != sorted(set(epochs)):
        problems.append(f"ids {ids} and epochs {epochs} do not both increase")
    if len(checkpoints) > store.max_retained:
        problems.append(f"{len(checkpoints)} checkpoints retained, retain is {store.max_retained}")
    resolver = CheckpointResolver(d.storage, store)
    for entry in store.all():
        try:
            metadata = resolver.read_metadata(entry.metadata_path)
        except Exception as exc:  # noqa: BLE001 - reported, the test asserts none
            problems.append(f"{entry.metadata_path}: {exc}")
            continue
        if metadata.checkpoint_id != entry.checkpoint_id:
            problems.append(f"{entry.metadata_path} holds checkpoint {metadata.checkpoint_id}")
    return problems


def local(url: str) -> Path:
    return Path(url.removeprefix("file://"))
