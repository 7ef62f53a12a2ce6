"""Comparing state values in Spark (maps support no equality, ordering or set operations), and a state's value
type with the one its table recorded."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.state.errors import StateSchemaError


def check_value_type(state: str, name: str, declared: T.DataType, recorded_json: str | None) -> None:
    """Refuse a value type other than the one the state's table recorded (``state``: how to call it in the
    message, e.g. ``state sum/total``; nothing when the table recorded none)."""
    if recorded_json is not None and recorded_json != declared.json():
        raise StateSchemaError(
            f"{state}: value type {declared.simpleString()} differs from the stored "
            f"{T._parse_datatype_json_string(recorded_json).simpleString()}",
            action="if only nullable fields were added, run `epochal restore` (a restore migrates only an added nullable "
            "field); else keep the stored type, or give the state another name (a new state starts empty; "
            "`epochal restore --allow-non-restored-state` drops the old one)",
            state=name,
        )


def contains_map(dtype: T.DataType) -> bool:
    """Whether a type holds a map anywhere (maps support no equality, ordering or set operations in Spark)."""
    if isinstance(dtype, T.MapType):
        return True
    if isinstance(dtype, T.ArrayType):
        return contains_map(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return any(contains_map(f.dataType) for f in dtype.fields)
    return False


def normal_column(column: Column, dtype: T.DataType) -> Column:
    """``column`` in a form ``<=>``, grouping and set operations accept, compared by content: maps become arrays
    of their entries sorted by key (two maps of the same entries are equal whatever their order)."""
    if not contains_map(dtype):
        return column
    if isinstance(dtype, T.MapType):
        entries = F.transform(
            F.map_entries(column),
            lambda e: F.struct(
                normal_column(e["key"], dtype.keyType).alias("key"), normal_column(e["value"], dtype.valueType).alias("value")
            ),
        )
        return F.array_sort(entries)
    if isinstance(dtype, T.ArrayType):
        return F.transform(column, lambda x: normal_column(x, dtype.elementType))
    assert isinstance(dtype, T.StructType)
    return F.when(column.isNull(), F.lit(None)).otherwise(
        F.struct(*[normal_column(column[f.name], f.dataType).alias(f.name) for f in dtype.fields])
    )


def normal_sql(expression: str, dtype: T.DataType, depth: int = 0) -> str:
    """:func:`normal_column` as SQL text over ``expression`` (for a MERGE's conditions, which Delta takes as SQL)."""
    if not contains_map(dtype):
        return expression
    var = f"__epochal_e{depth}"
    if isinstance(dtype, T.MapType):
        key = normal_sql(f"{var}.key", dtype.keyType, depth + 1)
        value = normal_sql(f"{var}.value", dtype.valueType, depth + 1)
        return f"array_sort(transform(map_entries({expression}), {var} -> named_struct('key', {key}, 'value', {value})))"
    if isinstance(dtype, T.ArrayType):
        return f"transform({expression}, {var} -> {normal_sql(var, dtype.elementType, depth + 1)})"
    assert isinstance(dtype, T.StructType)
    fields = ", ".join(
        f"{_sql_string(f.name)}, {normal_sql(f'{expression}.{quoted(f.name)}', f.dataType, depth)}" for f in dtype.fields
    )
    return f"CASE WHEN {expression} IS NULL THEN NULL ELSE named_struct({fields}) END"


def quoted(name: str) -> str:
    """A column name as SQL reads it whatever its characters."""
    return "`" + name.replace("`", "``") + "`"


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
