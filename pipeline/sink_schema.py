"""A sink's table against its :class:`~epochal.pipeline.stage.SinkSpec`: the columns they do not share.

A sink writes the columns its spec declares into a table created with them. When the spec changes
afterwards (a column added, dropped or retyped), Delta's MERGE or append fails half-way through an epoch
with its own error (``DELTA_MERGE_UNRESOLVED_EXPRESSION``...), or an append silently leaves a dropped
column null. :func:`refuse_drift` compares the schema in the table's Delta log (the version the write
starts from, read without Spark) with the spec's, by name (as Delta resolves them, case-insensitively)
and type (nullability and field metadata ignored), and refuses the write with a :class:`SinkSchemaError`
naming each difference and the way out. Generated and identity columns the table computes itself are
not expected in the spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import types as T

from epochal.pipeline.errors import SinkSchemaError
from epochal.state.recovery.schema import same_columns

#: Column metadata marking a column the table fills itself (a writer never supplies it).
_COMPUTED = ("delta.generationExpression", "delta.identity.start")


@dataclass(frozen=True)
class SchemaDrift:
    """The differences between a sink's table and its spec (empty: none)."""

    missing_from_table: tuple[T.StructField, ...] = ()
    missing_from_spec: tuple[T.StructField, ...] = ()
    #: (column, its type in the table, its type in the spec)
    changed: tuple[tuple[str, T.DataType, T.DataType], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.missing_from_table or self.missing_from_spec or self.changed)

    def describe(self) -> str:
        parts = []
        if self.missing_from_table:
            parts.append(f"missing from the table: {_fields(self.missing_from_table)}")
        if self.missing_from_spec:
            parts.append(f"missing from the SinkSpec: {_fields(self.missing_from_spec)}")
        if self.changed:
            parts.append("changed type: " + ", ".join(
                f"{_name(c)} is {_sql(t)} in the table, {_sql(s)} in the SinkSpec" for c, t, s in self.changed))
        return "; ".join(parts)


def schema_drift(table: T.StructType, spec: T.StructType) -> SchemaDrift:
    """How ``table`` (a sink table's schema) differs from ``spec`` (the columns the sink writes)."""
    in_table = {f.name.lower(): f for f in table.fields}
    in_spec = {f.name.lower(): f for f in spec.fields}
    return SchemaDrift(
        missing_from_table=tuple(f for k, f in in_spec.items() if k not in in_table),
        missing_from_spec=tuple(f for k, f in in_table.items()
                                if k not in in_spec and not any(m in f.metadata for m in _COMPUTED)),
        changed=tuple((f.name, in_table[k].dataType, f.dataType) for k, f in in_spec.items()
                      if k in in_table and not same_columns(in_table[k].dataType, f.dataType)),
    )


def refuse_drift(table: T.StructType, spec: T.StructType, *, sink: str, path: str, epoch: int,
                 partition: str | None, up_front: bool = False, epoch_column: str | None = None,
                 append: bool = False) -> None:
    """Raise :class:`SinkSchemaError` when the table's schema differs from the spec's (see :func:`schema_drift`).

    ``up_front``: checked before a run's first epoch (nothing of it done, so no recovery comes between the way out
    and the next run); else at the sink's write, inside an epoch the next run recovers from. ``epoch_column``:
    the column an append sink's table has (``append``: the spec's mode is APPEND), by which a changed mode is
    named as such (probe 15: UPSERT to APPEND was refused as a column to add, whose ALTER would have left the old
    rows with a null epoch in an append table)."""
    drift = schema_drift(table, spec)
    if not drift:
        return
    if epoch_column is not None:
        column = epoch_column.lower()
        was_upsert = append and any(f.name.lower() == column for f in drift.missing_from_table)
        was_append = not append and any(f.name.lower() == column for f in drift.missing_from_spec)
        if was_upsert or was_append:
            old, new = ("UPSERT", "APPEND") if was_upsert else ("APPEND", "UPSERT")
            raise SinkSchemaError(
                sink, epoch, partition, path,
                f"its mode changed: the SinkSpec is {new}, the table was written by an {old} sink (an append sink's "
                f"table has the column {epoch_column}); {drift.describe()}",
                f"change the SinkSpec's mode back to {old}; a sink of another mode needs a table of its own: give "
                "the SinkSpec another name", up_front=up_front)
    first = "" if up_front else (
        "run `epochal restore` first (the recovery of the failed epoch restores the table's earlier version, "
        "which would undo a change made before it), then ")
    if drift.missing_from_table and not (drift.missing_from_spec or drift.changed):
        action = (f"{first}add the column(s) to the table "
                  f"(ALTER TABLE delta.`{path}` ADD COLUMNS ({_fields(drift.missing_from_table)})) and run again; "
                  "or change the SinkSpec back")
    else:
        action = (f"change the SinkSpec back to the table's columns; or {first}change the table to the SinkSpec's "
                  "columns (ALTER TABLE, or rewrite it) and run again")
    raise SinkSchemaError(sink, epoch, partition, path, drift.describe(), action, up_front=up_front)


def _fields(fields: tuple[T.StructField, ...]) -> str:
    return ", ".join(f"{_name(f.name)} {_sql(f.dataType)}" for f in fields)


def _name(column: str) -> str:
    return column if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column) else "`" + column.replace("`", "``") + "`"


def _sql(dtype: T.DataType) -> str:
    """A type as SQL DDL reads it (``BIGINT``; nested types as Spark spells them, field names kept)."""
    text = dtype.simpleString()
    return text if isinstance(dtype, (T.StructType, T.ArrayType, T.MapType)) else text.upper()
