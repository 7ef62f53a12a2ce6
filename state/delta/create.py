"""Delta's ``CREATE TABLE`` of an empty table, written from the log: version 0 in one commit, no Spark.

Delta's own create (``DeltaTable.createIfNotExists``) costs 0.6 to 1 second a table in a warm JVM on this
project's 2-core machine (7 seconds for the first in a fresh one), however small the table: a deployment of
the example creates eleven (its states and sinks), every new deployment, ``epochal verify`` scenario and
savepoint restored into a new place pays it. The commit it writes is small and fixed: ``commitInfo``
(``CREATE TABLE``), ``metaData`` (a new id, the schema, no partition columns, the properties) and
``protocol``. :func:`create_commit` writes the same three actions, put-if-absent as
``_delta_log/00000000000000000000.json`` (see :mod:`epochal.state.delta.restore`), so a crash leaves no
table or the whole one, and a concurrent creator wins or loses cleanly (the table then exists: what
``createIfNotExists`` wants).

Only where the protocol Delta would choose is known here: the tables epochal creates, with the properties
in :data:`KNOWN_PROPERTIES` (deletion vectors on: reader 3, writer 7, as Delta 4 writes it; off: reader 1,
writer 2), columns of types that need no table feature, named as Delta accepts without column mapping, and
no field metadata, no name twice. Anything else (``timestamp_ntz``, ``variant``, ``char``/``varchar``, a
comment, a name twice, a session default of Delta's ``spark.databricks.delta.properties.defaults.*``, a
folder already holding files) returns False, and the caller runs Delta's own create, which decides and
explains (or refuses).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from epochal.state.delta.checkpoints import LOG_DIR
from epochal.state.delta.log import DeltaLog
from epochal.state.delta.restore import engine_info, put_if_absent

log = logging.getLogger(__name__)

#: Delta table properties whose protocol this module knows (any other one: Delta's own create).
KNOWN_PROPERTIES = frozenset({
    "delta.enableDeletionVectors", "delta.logRetentionDuration", "delta.deletedFileRetentionDuration",
    "delta.checkpointInterval",
})
#: Session settings under which Delta's create may add properties or features of its own.
SESSION_DEFAULTS = ("spark.databricks.delta.properties.defaults.", "spark.databricks.delta.tableFeatures.")
#: What Delta 4 writes for a table with deletion vectors on, and without any table feature.
DELETION_VECTORS_PROTOCOL = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors", "invariants", "appendOnly"]}
LEGACY_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
#: Types that need no table feature (``timestamp_ntz`` and ``variant`` do; ``void``, intervals are refused).
PLAIN_TYPES = frozenset({"string", "binary", "boolean", "byte", "short", "integer", "long", "float", "double",
                         "date", "timestamp"})
#: The bins of Delta's histogram of deleted-record counts per file (``DeletedRecordCountsHistogramUtils``).
DELETED_RECORD_BINS = 10
_DECIMAL = re.compile(r"decimal\(\d+,\s*\d+\)")
#: Characters Delta refuses in a column name without column mapping.
_BAD_NAME = re.compile(r"[ ,;{}()\n\t=]")


def create_commit(table_url: str, schema_json: str, properties: Mapping[str, str],
                  session_conf: Mapping[str, str] = ()) -> bool:
    """Create the empty Delta table at ``table_url`` (version 0) unless it exists; True when it exists afterwards.

    ``schema_json`` is written as the ``schemaString`` as it is: give it as Spark's JVM writes it (PySpark's
    ``StructType.json()`` sorts the keys; Delta's own create writes the JVM's order).

    False when Delta's own create must decide (see the module): nothing was written then.
    """
    schema = json.loads(schema_json)
    refusal = _unsupported(schema, properties, dict(session_conf))
    table = DeltaLog(table_url)
    if refusal is None and _holds_files(table):
        if table.exists():
            return True
        refusal = f"{table.url} already holds files"
    if refusal is not None:
        log.debug("%s: Delta's own CREATE TABLE (%s)", table_url, refusal)
        return False
    now = int(time.time() * 1000)
    protocol = DELETION_VECTORS_PROTOCOL if properties.get("delta.enableDeletionVectors") == "true" else LEGACY_PROTOCOL
    actions = [
        {"commitInfo": _commit_info(now, properties)},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": schema_json,
                      "partitionColumns": [], "configuration": dict(properties), "createdTime": now}},
        {"protocol": protocol},
    ]
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    table.fs.makedirs(f"{table.root}/{LOG_DIR}", exist_ok=True)
    if put_if_absent(table, 0, text.encode("utf-8")):  # else another creator's version 0: the table exists
        put_if_absent(table, 0, _checksum(actions[1]["metaData"], protocol), suffix="crc")
    return True


def _checksum(metadata: Mapping[str, Any], protocol: Mapping[str, Any]) -> bytes:
    """Version 0's checksum file (Delta's ``VersionChecksum``: no files, one metaData, one protocol).

    Without it, the first Delta operation on the table reconstructs its state with Spark jobs (three more
    for a first append); with it, Delta reads the protocol and metadata from here, as it does for a table
    it created itself (whose snapshot it keeps in memory). The file-size histograms are optional: left out.
    """
    checksum: dict[str, Any] = {"tableSizeBytes": 0, "numFiles": 0, "numMetadata": 1, "numProtocol": 1,
                                "setTransactions": [], "domainMetadata": [], "metadata": dict(metadata),
                                "protocol": dict(protocol), "allFiles": []}
    if "deletionVectors" in protocol.get("readerFeatures", ()):
        checksum.update(numDeletedRecordsOpt=0, numDeletionVectorsOpt=0,
                        deletedRecordCountsHistogramOpt={"deletedRecordCounts": [0] * DELETED_RECORD_BINS})
    return json.dumps(checksum, separators=(",", ":")).encode("utf-8")


def _unsupported(
    schema: Mapping[str, Any], properties: Mapping[str, str], session_conf: Mapping[str, str]
) -> str | None:
    """Why the protocol and checks of Delta's create are not known here (None: they are)."""
    if unknown := sorted(k for k in properties if k.startswith("delta.") and k not in KNOWN_PROPERTIES):
        return f"table propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}"
    if properties.get("delta.enableDeletionVectors", "false") not in ("true", "false"):
        return "delta.enableDeletionVectors is neither true nor false"
    if defaults := sorted(k for k in session_conf if k.startswith(SESSION_DEFAULTS)):
        return f"session default(s) {', '.join(defaults)}"
    if not schema.get("fields"):
        return "no columns"
    return _unsupported_fields(schema["fields"])


def _unsupported_fields(fields: list[Mapping[str, Any]]) -> str | None:
    names = [str(field.get("name", "")).lower() for field in fields]
    if duplicated := sorted({n for n in names if names.count(n) > 1}):
        return f"column name(s) {', '.join(duplicated)} more than once (case-insensitively)"
    for field in fields:
        name = str(field.get("name", ""))
        if not name or _BAD_NAME.search(name):
            return f"column name {name!r}"
        if field.get("metadata"):
            return f"column {name!r} has metadata"
        if (refusal := _unsupported_type(field.get("type"))) is not None:
            return f"column {name!r}: {refusal}"
    return None


def _unsupported_type(data_type: Any) -> str | None:
    if isinstance(data_type, str):
        return None if data_type in PLAIN_TYPES or _DECIMAL.fullmatch(data_type) else f"type {data_type}"
    if not isinstance(data_type, Mapping):
        return f"type {data_type!r}"
    kind = data_type.get("type")
    if kind == "struct":
        return _unsupported_fields(data_type.get("fields") or [])
    if kind == "array":
        return _unsupported_type(data_type.get("elementType"))
    if kind == "map":
        return _unsupported_type(data_type.get("keyType")) or _unsupported_type(data_type.get("valueType"))
    return f"type {kind}"


def _holds_files(table: DeltaLog) -> bool:
    try:
        return bool(table.fs.ls(table.root, detail=False))
    except FileNotFoundError:
        return False


def _commit_info(now: int, properties: Mapping[str, str]) -> dict[str, Any]:
    """The ``commitInfo`` Delta's ``CREATE TABLE`` writes (a blind append of no files)."""
    return {
        "timestamp": now,
        "operation": "CREATE TABLE",
        "operationParameters": {"partitionBy": "[]", "clusterBy": "[]", "description": None, "isManaged": "false",
                                "properties": json.dumps(dict(properties), separators=(",", ":"))},
        "isolationLevel": "Serializable",
        "isBlindAppend": True,
        "operationMetrics": {},
        "engineInfo": engine_info("CREATE TABLE"),
        "txnId": str(uuid.uuid4()),
    }
