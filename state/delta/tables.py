"""Table-level Delta operations shared by every kind of state and by the sinks.

Describe a table's current version as a :class:`StateHandle`, make a working
table hold what a handle names (Delta RESTORE on the same table, a copy from a
savepoint's), and create an empty table with its properties in one commit.
"""

from __future__ import annotations

from pyspark.sql import types as T

from epochal.state.delta import io as delta_io
from epochal.state.errors import StateTableNotFound
from epochal.state.delta.paths import same_location
from epochal.state.handles import StateHandle, StateKind


def snapshot_table(
    spark, path: str, *, stage: str, state: str, kind: StateKind, state_type: str,
    max_parallelism: int | None, parallelism: int | None,
) -> StateHandle:
    """Describe the current version of a state table as a :class:`StateHandle`.

    Metadata only: the Delta log gives the version, bytes, rows (file statistics) and
    schema; rows are counted with Spark only when some file has no statistics.
    """
    summary = delta_io.table_summary(path)
    rows = summary.rows
    if rows is None:
        rows = delta_io.read_version(spark, path, summary.version).count()
    return StateHandle(
        stage=stage,
        state=state,
        kind=kind,
        state_type=state_type,
        table_path=path,
        version=summary.version,
        rows=rows,
        bytes_total=summary.bytes_total,
        bytes_added=delta_io.bytes_added(path, summary.version),
        schema_json=summary.schema_json,
        max_parallelism=max_parallelism,
        parallelism=parallelism,
    )


def restore_table(spark, working_path: str, handle: StateHandle) -> None:
    """Make ``working_path`` hold what ``handle`` names.

    A handle on the working table itself is restored with Delta's RESTORE (a new
    version that re-adds the old files: metadata only). A handle on another table
    (a savepoint's self-contained copy) is copied over the working table.
    """
    from epochal.state.delta.restore import restore_to_version

    if not delta_io.is_delta_table(handle.table_path):
        raise StateTableNotFound(
            f"state table of {handle.key} is missing at {handle.table_path}",
            action="restore from another checkpoint or savepoint",
            path=handle.table_path,
        )
    if same_location(handle.table_path, working_path) and delta_io.is_delta_table(working_path):
        if delta_io.current_version(spark, working_path) != handle.version:
            restore_to_version(spark, working_path, handle.version)
        return
    source = delta_io.read_version(spark, handle.table_path, handle.version)
    props = delta_io.table_detail(spark, handle.table_path).properties
    writer = source.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    writer.save(working_path)
    epochal_props = {k: v for k, v in props.items() if k.startswith(("epochal.", "delta."))}
    if epochal_props:
        assignments = ", ".join(f"'{k}' = '{v}'" for k, v in epochal_props.items())
        spark.sql(f"ALTER TABLE delta.`{working_path}` SET TBLPROPERTIES ({assignments})")


def create_table(spark, path: str, schema: T.StructType, properties: dict[str, str]) -> None:
    """Create an empty Delta table with its properties in one commit (version 0), unless it exists.

    Written from the log where its protocol is known (:mod:`epochal.state.delta.create`: milliseconds, where
    Delta's own create takes most of a second); else Delta's ``createIfNotExists``.
    """
    from delta.tables import DeltaTable

    from epochal.state.delta.create import create_commit
    from epochal.state.delta.paths import to_url

    schema_json = spark._jsparkSession.parseDataType(schema.json()).json()  # as Delta writes it
    if create_commit(to_url(path), schema_json, properties, _delta_session_conf(spark)):
        return
    location = path[len("file://"):] if path.startswith("file:///") else path  # Delta qualifies it itself
    builder = DeltaTable.createIfNotExists(spark).location(location).addColumns(schema)
    for key, value in properties.items():
        builder = builder.property(key, value)
    builder.execute()


def _delta_session_conf(spark) -> dict[str, str]:
    """The session's Delta settings (runtime and static): what Delta's own create would read."""
    return {k: v for k, v in spark.conf.getAll.items() if k.startswith("spark.databricks.delta.")}
