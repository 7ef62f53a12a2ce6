"""Delta's ``RESTORE TABLE ... TO VERSION AS OF``, written from the log: one commit, no Spark job.

Delta's own RESTORE (``DeltaTable.restoreToVersion``) costs 3 to 4 seconds a table on
this machine however small the table: it diffs the two versions' file lists with Spark
jobs, checks every file exists with another, and collects metrics with more. A restore
of the example touches nine tables (seven states, two sinks): half a minute before the
first epoch runs again, in every crash recovery, backfill and ``epochal restore``.

The commit is the one Delta writes (see Delta's ``RestoreTableCommand`` and delta-rs's
``restore``): the target version's files missing from the latest are added back,
the latest's files missing from the target are removed, both with ``dataChange``,
keyed as Delta keys a file (path and deletion vector id); ``commitInfo`` names the
operation ``RESTORE`` with its version and metrics, so ``DESCRIBE HISTORY`` shows it as
Delta's would. It is written put-if-absent as ``_delta_log/<latest + 1>.json`` (a hard link
of a finished temporary file on a local disk, an if-absent create on an object store), so
a crash leaves either no commit or the whole one, and a concurrent writer wins or loses
cleanly.

Only where that commit is all a RESTORE needs: :func:`restore_commit` returns ``None``
and the caller runs Delta's own when the target's files are not all on storage, the two
versions' ``metaData`` or ``protocol`` differ, the table has a writer feature this module
does not know to be safe for a file-only commit (row tracking, in-commit timestamps,
column mapping, catalog-managed commits, ...), is append-only or feeds a change data
feed, or another commit took the version first.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from epochal.state.delta.checkpoints import LOG_DIR
from epochal.state.delta.log import DeltaLog, LiveFile, VersionSnapshot
from epochal.state.errors import SnapshotUnavailable

log = logging.getLogger(__name__)

#: Writer features a commit of existing files' adds and removes honours as it is: deletion
#: vectors are copied with their files; invariants, constraints and generated columns
#: concern new data only (a restore writes none). ``appendOnly`` is a feature every
#: writer-version-7 table lists: a table that enables it (``delta.appendOnly``) is refused below.
SAFE_WRITER_FEATURES = frozenset({
    "appendOnly", "invariants", "checkConstraints", "generatedColumns", "deletionVectors", "timestampNtz",
})
#: Writer versions without table features: 2 (append-only, invariants), 3 (check constraints).
SAFE_LEGACY_WRITER_VERSION = 3
#: Table properties under which a RESTORE is Delta's own business (refused, or more than a commit of files).
REFUSED_PROPERTIES = {"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true"}


def restore_commit(table_url: str, version: int, *, user_metadata: str | None = None,
                   keep_added_columns: bool = False) -> int | None:
    """Restore the Delta table at ``table_url`` to ``version`` with one commit written from its log.

    Returns the table's version afterwards (the latest unchanged when it already holds
    ``version``'s files), or ``None`` when this table needs Delta's own RESTORE (see the module).
    ``keep_added_columns``: where the only change of metadata since ``version`` is nullable columns added at the
    end (``ALTER TABLE ... ADD COLUMNS``), restore the files and keep the latest schema, in which the restored
    files' rows read those columns as null (a sink whose user added a column: probe 15).
    """
    table = DeltaLog(table_url)
    latest = table.latest_version()
    if latest is None or not 0 <= version <= latest:
        return None
    try:
        snapshots = table.snapshots([version, latest])
    except SnapshotUnavailable as exc:
        log.debug("%s: %s", table_url, exc)
        return None
    target, current = snapshots[version], snapshots[latest]
    refusal = unsupported(target, current, keep_added_columns=keep_added_columns)
    if refusal is None and (missing := table.missing_files(target)):
        refusal = f"{len(missing)} file(s) of version {version} are gone, e.g. {missing[0]}"
    if refusal is not None:
        log.info("%s: Delta's own RESTORE to version %s (%s)", table_url, version, refusal)
        return None
    wanted = {f.key: f for f in target.files}
    present = {f.key: f for f in current.files}
    added = [f for k, f in wanted.items() if k not in present]
    removed = [f for k, f in present.items() if k not in wanted]
    if not added and not removed:
        return latest
    now = int(time.time() * 1000)
    actions = [{"commitInfo": _commit_info(now, version, latest, added, removed, target, user_metadata)}]
    actions += [{"remove": _remove(f, now)} for f in removed]
    actions += [{"add": _add(f)} for f in added]
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    if not put_if_absent(table, latest + 1, text.encode("utf-8")):
        log.info("%s: version %s was written by another commit; Delta's own RESTORE instead", table_url, latest + 1)
        return None
    return latest + 1


def unsupported(target: VersionSnapshot, current: VersionSnapshot, *, keep_added_columns: bool = False) -> str | None:
    """Why a commit of files alone would not restore ``current`` to ``target`` (None: it would)."""
    if target.protocol is None or current.protocol is None:
        return "a version without a protocol action"
    if _protocol(target.protocol) != _protocol(current.protocol):
        return "the protocol changed since"
    if _metadata(target) != _metadata(current) and not (keep_added_columns and _only_columns_added(target, current)):
        return "the table's metadata changed since"
    protocol = current.protocol
    writer_version = int(protocol.get("minWriterVersion") or 0)
    if writer_version >= 7:
        features = set(_names(protocol.get("writerFeatures")))
        if unknown := sorted(features - SAFE_WRITER_FEATURES):
            return f"writer feature(s) {', '.join(unknown)}"
    elif writer_version > SAFE_LEGACY_WRITER_VERSION:
        return f"writer version {writer_version}"
    for key, value in REFUSED_PROPERTIES.items():
        if str(current.configuration.get(key, "")).lower() == value:
            return f"{key}={value}"
    if any(f.action is None for f in (*target.files, *current.files)):
        return "a file without its add action"
    return None


def put_if_absent(table: DeltaLog, version: int, data: bytes, *, suffix: str = "json") -> bool:
    """Write commit ``version`` (or, with ``suffix="crc"``, its checksum file) whole, unless it exists: False then."""
    fs, directory = table.fs, f"{table.root}/{LOG_DIR}"
    final = f"{directory}/{version:020d}.{suffix}"
    if "file" not in _protocols(fs):
        try:
            with fs.open(final, "xb") as handle:  # an object store's PUT is whole or absent
                handle.write(data)
        except FileExistsError:
            return False
        return True
    temporary = f"{directory}/.{version:020d}.{suffix}.{uuid.uuid4().hex}.tmp"  # a dot-name: no reader lists it
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, final)  # atomic, and fails if the commit exists
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)
    return True


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _commit_info(now: int, version: int, latest: int, added: list[LiveFile], removed: list[LiveFile],
                 target: VersionSnapshot, user_metadata: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "timestamp": now,
        "operation": "RESTORE",
        "operationParameters": {"version": version, "timestamp": None},
        "readVersion": latest,
        "isolationLevel": "Serializable",
        "isBlindAppend": False,
        "operationMetrics": {
            "numRestoredFiles": str(len(added)), "restoredFilesSize": str(sum(f.size for f in added)),
            "numRemovedFiles": str(len(removed)), "removedFilesSize": str(sum(f.size for f in removed)),
            "tableSizeAfterRestore": str(target.bytes_total), "numOfFilesAfterRestore": str(len(target.files)),
        },
        "engineInfo": engine_info("RESTORE"),
        "txnId": str(uuid.uuid4()),
    }
    if user_metadata:
        info["userMetadata"] = user_metadata
    return info


def engine_info(operation: str) -> str:
    """``commitInfo.engineInfo`` of a commit epochal writes from the log (``operation``: what Delta would call it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"epochal/{version('epochal')} ({operation} written from the Delta log)"
    except PackageNotFoundError:
        return f"epochal ({operation} written from the Delta log)"


def _add(file: LiveFile) -> dict[str, Any]:
    """``file``'s add action again, as JSON has it, with ``dataChange`` (rows come back)."""
    raw = dict(file.action or {})
    partition_values = raw.get("partitionValues") or {}  # a null value is a partition of nulls: kept
    action = _plain(raw)
    action["partitionValues"] = dict(partition_values)  # a map, or pyarrow's list of pairs
    if "tags" in action:
        action["tags"] = _map(action["tags"])
    action["dataChange"] = True
    return action


def _remove(file: LiveFile, now: int) -> dict[str, Any]:
    """The remove action of a live ``file`` (Delta's ``AddFile.removeWithTimestamp``)."""
    add = _add(file)
    remove = {"path": add["path"], "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
              "partitionValues": add["partitionValues"], "size": add["size"]}
    for key in ("tags", "deletionVector", "baseRowId", "defaultRowCommitVersion", "stats"):
        if key in add:
            remove[key] = add[key]
    return remove


def _plain(value: Any) -> Any:
    """A value read from JSON or from parquet by pyarrow, as JSON holds it (no nulls; maps as objects)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return {str(k): _plain(v) for k, v in value}
        return [_plain(v) for v in value]
    return value


def _map(value: Any) -> dict[str, Any]:
    """A map field (``partitionValues``, ``tags``): an empty list from parquet is an empty map."""
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> list[str]:
    return [str(v) for v in (value or [])]


def _protocol(protocol: Mapping[str, Any]) -> tuple:
    return (int(protocol.get("minReaderVersion") or 0), int(protocol.get("minWriterVersion") or 0),
            sorted(_names(protocol.get("readerFeatures"))), sorted(_names(protocol.get("writerFeatures"))))


def _metadata(snapshot: VersionSnapshot) -> dict[str, Any]:
    """What a restore must not change: the table's id, schema, partitioning, properties and format (the
    replay already read the schema and properties into plain values)."""
    plain = _plain(dict(snapshot.metadata or {}))
    form = plain.get("format") if isinstance(plain.get("format"), dict) else {}
    return {"id": plain.get("id"), "schema": snapshot.schema_json, "partitioning": _names(plain.get("partitionColumns")),
            "properties": dict(snapshot.configuration), "provider": form.get("provider"),
            "options": _map(form.get("options"))}


def _only_columns_added(target: VersionSnapshot, current: VersionSnapshot) -> bool:
    """``current``'s metadata is ``target``'s but for nullable columns added after its columns."""
    old, new = json.loads(target.schema_json)["fields"], json.loads(current.schema_json)["fields"]
    same_rest = _metadata(target) | {"schema": None} == _metadata(current) | {"schema": None}
    return same_rest and len(new) > len(old) and new[: len(old)] == old and all(f.get("nullable") for f in new[len(old):])


def restore_to_version(spark: Any, path: str, version: int, *, user_metadata: str | None = None,
                       keep_added_columns: bool = False) -> None:
    """RESTORE the table at ``path`` (a Spark path or URL) to ``version``: the commit from the log
    where it is all a RESTORE needs, else Delta's own (which raises when the version cannot be restored).
    ``keep_added_columns``: see :func:`restore_commit`."""
    from delta.tables import DeltaTable

    from epochal.state.delta.paths import to_spark, to_url

    if restore_commit(to_url(path), version, user_metadata=user_metadata, keep_added_columns=keep_added_columns) is None:
        DeltaTable.forPath(spark, to_spark(path)).restoreToVersion(version)
