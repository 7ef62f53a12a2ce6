"""Comparing state values in Spark: maps support no equality, ordering or set operations."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T


def contains_map(dtype: T.DataType) -> bool:
    """Whether a type holds a map anywhere (maps support no equality, ordering or set operations in Spark)."""
    if isinstance(dtype, T.MapType):
        return True
    if isinstance(dtype, T.ArrayType):
        return contains_map(dtype.elementType)
    if isinstance(dtype, T.StructType):
        return any(contains_map(f.dataType) for f in dtype.fields)
    return False


def comparable(col: Column, dtype: T.DataType) -> Column:
    """A form of ``col`` that supports ``<=>`` (maps are not comparable in Spark)."""
    if isinstance(dtype, T.MapType):
        return F.to_json(F.array_sort(F.map_entries(col)))
    if contains_map(dtype):
        return F.to_json(col)
    return col
