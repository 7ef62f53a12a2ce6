"""Small helpers over Delta tables: versions, bytes per commit, table properties.

Sizes are read from the Delta log (the ``add`` actions of one commit and the
table's live files), which is metadata: no state data is read to measure it.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

import fsspec

from epochal.state.delta.checkpoints import json_actions
from epochal.state.delta.paths import to_url

# A state table keeps every version a retained checkpoint may point at: epochal's
# own retention (not Delta's clock) decides when files go.
LONG_RETENTION = "interval 36500 days"
# Keyed and operator state tables: deletion vectors pay here (a MERGE of a few changed keys
# marks rows deleted instead of rewriting whole files). Only Delta readers that support the
# deletionVectors reader feature open these working tables (Spark, DuckDB; not delta-rs 1.6):
# savepoints and sinks are written without it.
# A Delta checkpoint every 100 commits, not 10: a state table takes one commit an epoch, and Delta writes its
# checkpoint inside the commit that reaches the interval (a parquet write and a state reconstruction, 1-2 s of
# driver time a table): with 10, every tenth epoch of the example paid 8-14 s more (docs/performance.md).
# Readers lose little: epochal's own replay reads each commit file once a process (state/delta/log.py). A session
# that names Delta's own default for new tables (spark.databricks.delta.properties.defaults.checkpointInterval)
# gets that instead: see state_table_properties.
STATE_TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "true",
    "delta.logRetentionDuration": LONG_RETENTION,
    "delta.deletedFileRetentionDuration": LONG_RETENTION,
    "delta.checkpointInterval": "100",
}
#: Delta's session default for the checkpoint interval of the tables it creates.
CHECKPOINT_INTERVAL_DEFAULT_CONF = "spark.databricks.delta.properties.defaults.checkpointInterval"
# What users consume (sinks) and what users own (the state tables of savepoints and full
# checkpoints, Flink's canonical format): reader version 1 features only, so that every
# Delta reader opens them (Spark, delta-rs/polars/pandas, DuckDB).
PORTABLE_TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
}


def state_table_properties(spark) -> dict[str, str]:
    """:data:`STATE_TABLE_PROPERTIES`, with the session's default checkpoint interval for new Delta tables if it
    names one (Delta's ``spark.databricks.delta.properties.defaults.checkpointInterval``)."""
    interval = spark.conf.get(CHECKPOINT_INTERVAL_DEFAULT_CONF, None)
    if not interval:
        return dict(STATE_TABLE_PROPERTIES)
    return {**STATE_TABLE_PROPERTIES, "delta.checkpointInterval": str(interval)}


def _fs(path: str):
    fs, root = fsspec.core.url_to_fs(to_url(path))
    return fs, root


def delta_log_dir(path: str) -> str:
    return posixpath.join(path.rstrip("/"), "_delta_log")


def is_delta_table(path: str) -> bool:
    fs, root = _fs(delta_log_dir(path))
    return fs.exists(root)


def commit_actions(path: str, version: int) -> list[dict]:
    """The actions of commit ``version`` (one JSON object per line of the log file)."""
    fs, root = _fs(posixpath.join(delta_log_dir(path), f"{version:020d}.json"))
    with fs.open(root, "rb") as fh:
        return json_actions(fh.read().decode("utf-8"))


def bytes_added_between(path: str, first: int, last: int) -> int:
    """Bytes of the data and deletion-vector files that the commits ``first..last`` (those the log still holds:
    older ones may be pruned) added and left live: what a checkpoint at ``last`` adds to one at ``first - 1``.

    A file added and removed again within the range (an epoch's attempt rolled back by a restore or a replay,
    a file a later epoch rewrote) counts nothing, nor does a file the range removed and added back (a ``RESTORE``
    commit re-adds the files of the version it restores, written before).
    """
    fs, root = _fs(delta_log_dir(path))
    try:
        names = {posixpath.basename(str(n)) for n in fs.ls(root, detail=False)}
    except FileNotFoundError:
        return 0
    return _added_and_left_live(commit_actions(path, v) for v in range(max(first, 0), last + 1)
                                if f"{v:020d}.json" in names)


def bytes_added(path: str, version: int) -> int:
    """Bytes written by commit ``version``: new data files plus new deletion-vector files.

    A commit that marks rows deleted in an existing file removes and re-adds that
    file with a deletion vector: the re-added file costs nothing new, its
    deletion vector does.
    """
    return _added_and_left_live([commit_actions(path, version)])


def _added_and_left_live(commits: Iterable[list[dict]]) -> int:
    """Bytes of the files (data, deletion vectors) that ``commits``, in order, added and left live, less those they
    removed without having added them (written before) and then added back."""
    new: dict[str, int] = {}  # file (data path, or a deletion vector's id) -> bytes, added and live
    dropped: dict[str, int] = {}  # added, then removed: counted again only if added back
    older: set[str] = set()  # removed without having been added here: written before
    for actions in commits:
        for action in actions:
            if "remove" in action:
                for name, _ in _files(action["remove"]):
                    if name in new:
                        dropped[name] = new.pop(name)
                    elif name not in dropped:
                        older.add(name)
        for action in actions:
            if "add" in action:
                for name, size in _files(action["add"]):
                    if name not in older:
                        new[name] = size
                        dropped.pop(name, None)
    return sum(new.values())


def _files(action: dict) -> list[tuple[str, int]]:
    """The files an ``add`` or ``remove`` action names: its data file, and its deletion vector's file if any."""
    found = [(f"data:{action['path']}", int(action.get("size") or 0))]
    dv = action.get("deletionVector")
    if dv and dv.get("storageType") != "i":
        found.append((f"dv:{dv.get('storageType')}:{dv.get('pathOrInlineDv')}", int(dv.get("sizeInBytes", 0))))
    return found


@dataclass(frozen=True)
class TableDetail:
    version: int
    bytes_total: int
    num_files: int
    properties: dict[str, str]


def _jvm_snapshot(spark, path: str):
    """The latest Delta snapshot of ``path`` from the JVM's DeltaLog (metadata only, no job)."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    none = jvm.scala.Option.empty()
    return jvm, log.update(False, none, none)


def table_detail(spark, path: str) -> TableDetail:
    """Current version, live bytes and properties of the Delta table at ``path``."""
    jvm, snapshot = _jvm_snapshot(spark, path)
    configuration = jvm.scala.collection.JavaConverters.mapAsJavaMap(snapshot.metadata().configuration())
    return TableDetail(
        version=int(snapshot.version()),
        bytes_total=int(snapshot.sizeInBytes()),
        num_files=int(snapshot.numOfFiles()),
        properties={str(k): str(v) for k, v in dict(configuration).items()},
    )


@dataclass(frozen=True)
class TableSummary:
    """What a checkpoint handle records about a table version, read from the Delta log alone."""

    version: int
    bytes_total: int
    rows: int | None  # None: some file has no statistics (count the rows with Spark)
    schema_json: str  # Spark's JSON form of the table schema
    properties: dict[str, str]


def table_summary(path: str, version: int | None = None) -> TableSummary:
    """Version (the latest when None), live bytes and rows, schema and properties: no Spark job.

    The log is replayed with fsspec (:class:`epochal.state.delta.log.DeltaLog`); rows come
    from the files' ``numRecords`` statistics minus the rows their deletion vectors delete.
    """
    from pyspark.sql import types as T

    from epochal.state.delta.log import DeltaLog

    table = DeltaLog(path)
    if version is None:
        version = table.latest_version()
        if version is None:
            raise FileNotFoundError(f"no Delta table at {path}")
    snapshot = table.snapshot(version)
    schema = T.StructType.fromJson(json.loads(snapshot.schema_json)).json()
    return TableSummary(version, snapshot.bytes_total, snapshot.rows, schema, dict(snapshot.configuration))


def _files_with_rows(path: str) -> list:
    """The latest version's live files that may hold rows (all, without statistics); none without a table."""
    from epochal.state.delta.log import DeltaLog

    table = DeltaLog(path)
    version = table.latest_version()
    return [] if version is None else [f for f in table.snapshot(version).files if f.records != 0]


def may_hold_at_or_before(path: str, column: str, moment: datetime) -> bool:
    """False only when the files' statistics prove every live row has ``column`` after ``moment``.

    A file with rows but no minimum for ``column`` (no statistics, or only nulls) may
    hold such a row. Statistics are at millisecond precision, rounded down, and count
    rows deletion vectors removed: the answer errs only towards True.
    """
    for live in _files_with_rows(path):
        text = (live.min_values or {}).get(column)
        if not isinstance(text, str):
            return True
        least = datetime.fromisoformat(text)
        if (least if least.tzinfo is not None else least.replace(tzinfo=timezone.utc)) <= moment:
            return True
    return False


def may_hold_above(path: str, column: str, value: int) -> bool:
    """False only when the files' statistics prove no live row has an integer ``column`` above ``value``
    (a file with rows and no maximum for it may; deleted rows still count: errs only towards True)."""
    for live in _files_with_rows(path):
        most = (live.max_values or {}).get(column)
        if not isinstance(most, int) or most > value:
            return True
    return False


def table_properties(path: str) -> dict[str, str]:
    """The latest table properties, from the Delta log (no Spark job)."""
    return table_summary(path).properties


def current_version(spark, path: str) -> int:
    return int(_jvm_snapshot(spark, path)[1].version())


def read_version(spark, path: str, version: int | None = None, *, log=None, snapshot=None):
    """The rows of ``version`` of the table (the latest, as Delta sees it at each evaluation, when None);
    ``log``, ``snapshot``: the table's :class:`~epochal.state.delta.log.DeltaLog` and that version's
    replay when the caller has them."""
    if version is not None:
        direct = read_files(spark, path, version, log=log, snapshot=snapshot)
        if direct is not None:
            return direct
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def read_pinned(spark, path: str, version: int | None = None):
    """The rows of ``version``, or of the latest version at the call: the frame shows that version however late
    Spark evaluates it."""
    from epochal.state.delta.log import DeltaLog

    log = DeltaLog(path)
    if version is None:
        version = log.latest_version()
        if version is None:
            raise FileNotFoundError(f"no Delta table at {path}")
    return read_version(spark, path, version, log=log)


#: Reader features whose tables read the same through Spark's parquet reader as through Delta's, as long as no
#: live file has a deletion vector (checked per version).
_PLAIN_READER_FEATURES = frozenset({"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
_GLOB = re.compile(r"[*?\[\]{}\\]")


def read_files(spark, path: str, version: int, *, log=None, snapshot=None):
    """The rows of ``version`` read straight from the parquet files its log lists, or None where only Delta's reader
    reads them right (deletion vectors, column mapping, partition columns, other reader features).

    Reading a version through Delta (``versionAsOf``) builds a snapshot of it: a few Spark jobs and their planning
    on the driver, even for a table of one file (docs/performance.md). The log replay here is metadata read with
    fsspec; the files of a version never change, so the frame is pinned to it.
    """
    from epochal.state.delta.log import DeltaLog
    from epochal.state.delta.paths import to_spark
    from epochal.state.errors import SnapshotUnavailable

    log = log or DeltaLog(path)
    if snapshot is None or snapshot.version != version:
        try:
            snapshot = log.snapshot(version)
        except SnapshotUnavailable:
            return None  # Delta's reader says what is wrong, in its words
    metadata, protocol = snapshot.metadata or {}, snapshot.protocol or {}
    features = set(protocol.get("readerFeatures") or ())
    if (
        metadata.get("partitionColumns")
        or snapshot.configuration.get("delta.columnMapping.mode", "none") != "none"
        or not features <= _PLAIN_READER_FEATURES
        or any(f.has_deletion_vector for f in snapshot.files)
    ):
        return None
    schema = snapshot.schema
    if not snapshot.files:
        from epochal.state.frames import empty_frame

        return empty_frame(spark, schema)
    files = [to_spark(f.path if "://" in f.path else log.physical_url(f.path)) for f in snapshot.files]
    if any(_GLOB.search(f) for f in files):
        return None  # Spark would expand them as patterns
    return spark.read.schema(schema).parquet(*files)
