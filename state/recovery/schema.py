"""Schema evolution of state on restore: identical, migratable, or incompatible.

The stored schema (the state table's, at the handle's version) is compared with
the schema the current state descriptor declares:

* IDENTICAL: same names and types, in the same order (nullability and field
  metadata are ignored: Delta relaxes nullability on some writes, and a value
  that breaks a NOT NULL column is refused by Delta when written);
* MIGRATABLE: the declared schema only adds nullable fields (at the top level or
  inside structs, also under arrays and map values) or reorders struct fields.
  The restored table is rewritten to the declared schema, new fields null;
* INCOMPATIBLE: a field was removed, changed type, or added as NOT NULL. The
  comparison names the first such column.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T


class SchemaVerdict(str, Enum):
    IDENTICAL = "identical"
    MIGRATABLE = "migratable"
    INCOMPATIBLE = "incompatible"


@dataclass(frozen=True)
class SchemaComparison:
    verdict: SchemaVerdict
    added: tuple[str, ...] = ()  # dotted names of the fields the migration adds (as null)
    column: str | None = None  # the first incompatible column
    problem: str | None = None  # what is wrong with it

    @property
    def needs_migration(self) -> bool:
        return self.verdict is SchemaVerdict.MIGRATABLE


def plain(dtype: T.DataType) -> T.DataType:
    """``dtype`` with every nullability flag set and field metadata dropped (for comparisons)."""
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, plain(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(plain(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(plain(dtype.keyType), plain(dtype.valueType), True)
    return dtype


def same_columns(a: T.DataType, b: T.DataType) -> bool:
    return plain(a) == plain(b)


class _Incompatible(Exception):
    def __init__(self, column: str, problem: str) -> None:
        super().__init__(problem)
        self.column = column
        self.problem = problem


def compare_schemas(stored: T.StructType, declared: T.StructType) -> SchemaComparison:
    """How ``stored`` relates to ``declared`` (see the module docstring)."""
    if same_columns(stored, declared):
        return SchemaComparison(SchemaVerdict.IDENTICAL)
    added: list[str] = []
    try:
        _compare("", stored, declared, added)
    except _Incompatible as exc:
        return SchemaComparison(SchemaVerdict.INCOMPATIBLE, column=exc.column, problem=exc.problem)
    return SchemaComparison(SchemaVerdict.MIGRATABLE, added=tuple(added))


def _name(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child


def _compare(path: str, stored: T.DataType, declared: T.DataType, added: list[str]) -> None:
    if isinstance(stored, T.StructType) and isinstance(declared, T.StructType):
        _compare_structs(path, stored, declared, added)
    elif isinstance(stored, T.ArrayType) and isinstance(declared, T.ArrayType):
        _compare(_name(path, "element"), stored.elementType, declared.elementType, added)
    elif isinstance(stored, T.MapType) and isinstance(declared, T.MapType):
        if not same_columns(stored.keyType, declared.keyType):
            raise _Incompatible(
                _name(path, "key"),
                f"map keys changed type from {stored.keyType.simpleString()} to {declared.keyType.simpleString()}",
            )
        _compare(_name(path, "value"), stored.valueType, declared.valueType, added)
    elif not same_columns(stored, declared):
        raise _Incompatible(path, f"changed type from {stored.simpleString()} to {declared.simpleString()}")


def _compare_structs(path: str, stored: T.StructType, declared: T.StructType, added: list[str]) -> None:
    declared_names = set(declared.names)
    for field in stored.fields:
        if field.name not in declared_names:
            raise _Incompatible(_name(path, field.name), "was removed (the stored state has it, the descriptor does not)")
    for field in declared.fields:
        name = _name(path, field.name)
        if field.name in stored.names:
            _compare(name, stored[field.name].dataType, field.dataType, added)
        elif field.nullable:
            added.append(name)
        else:
            raise _Incompatible(name, "was added as NOT NULL (restored rows would have no value for it)")


def conform_columns(stored: T.StructType, declared: T.StructType) -> list[Column]:
    """Select expressions turning rows of ``stored`` into rows of ``declared`` (new fields null)."""
    return [_field_or_null(F.col(f"`{f.name}`"), stored, f) for f in declared.fields]


def _field_or_null(parent_field: Column, stored: T.StructType, field: T.StructField) -> Column:
    if field.name not in stored.names:
        return F.lit(None).cast(field.dataType).alias(field.name)
    return _conform(parent_field, stored[field.name].dataType, field.dataType).alias(field.name)


def _conform(col: Column, stored: T.DataType, declared: T.DataType) -> Column:
    if same_columns(stored, declared):
        return col
    if isinstance(stored, T.StructType) and isinstance(declared, T.StructType):
        fields = [_field_or_null(col.getField(f.name), stored, f) for f in declared.fields]
        return F.when(col.isNull(), F.lit(None).cast(declared)).otherwise(F.struct(*fields))
    if isinstance(stored, T.ArrayType) and isinstance(declared, T.ArrayType):
        return F.transform(col, lambda x: _conform(x, stored.elementType, declared.elementType))
    if isinstance(stored, T.MapType) and isinstance(declared, T.MapType):
        return F.transform_values(col, lambda _k, v: _conform(v, stored.valueType, declared.valueType))
    return col.cast(declared)
