"""A Delta table version's rows in this process, read by delta-rs: ``epochal state read`` without a JVM.

delta-rs (``deltalake``) reads the version through its query engine, deletion vectors applied, on a local or
S3 location; the rows come out as PySpark's ``Row.asDict(recursive=True)`` gives them (timestamps as naive
local datetimes, maps as dicts), so a reader sees the same rows whichever engine read them. Other locations
(a Hadoop file system delta-rs does not speak) are read by Spark.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Callable

import pyarrow as pa
import pyarrow.types as t

from epochal.state.delta.objectstore import delta_rs_options
from epochal.state.delta.paths import to_url

Convert = Callable[[Any], Any]


def read_rows(location: str, version: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of ``version`` (default: the latest) of the Delta table at ``location``, at most ``limit``."""
    from deltalake import DeltaTable, QueryBuilder

    url = to_url(location)
    table = DeltaTable(url, version=version, storage_options=delta_rs_options(url, os.environ))
    sql = "SELECT * FROM state" + ("" if limit is None else f" LIMIT {int(limit)}")
    # RecordBatchReader.from_stream, not pa.table(): the latter imports pandas to ask whether this is a DataFrame (1 s)
    data = pa.RecordBatchReader.from_stream(QueryBuilder().register("state", table).execute(sql)).read_all()
    columns = []
    for field in data.schema:
        values, convert = data.column(field.name).to_pylist(), _converter(field.type)
        columns.append((field.name, values if convert is None else [_or_none(convert, v) for v in values]))
    return [{name: values[i] for name, values in columns} for i in range(data.num_rows)]


def _or_none(convert: Convert, value: Any) -> Any:
    return None if value is None else convert(value)


def _converter(kind: pa.DataType) -> Convert | None:
    """What turns a value of arrow type ``kind`` into what PySpark returns; None where they are the same
    (decided once per column, not per value)."""
    if t.is_timestamp(kind):
        # PySpark's TimestampType: a naive datetime in this process's time zone; TimestampNTZType: naive as stored.
        return None if kind.tz is None else _local_naive
    if t.is_map(kind):
        key, item = _converter(kind.key_type) or _same, _converter(kind.item_type) or _same
        return lambda pairs: {_or_none(key, k): _or_none(item, v) for k, v in pairs}
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind) or t.is_list_view(kind):
        element = _converter(kind.value_type)
        return None if element is None else (lambda values: [_or_none(element, v) for v in values])
    if t.is_struct(kind):
        fields = [(kind.field(i).name, _converter(kind.field(i).type)) for i in range(kind.num_fields)]
        if all(convert is None for _, convert in fields):
            return None
        return lambda value: {name: value[name] if c is None else _or_none(c, value[name]) for name, c in fields}
    return None


def _local_naive(value: datetime) -> datetime:
    return value.astimezone().replace(tzinfo=None)


def _same(value: Any) -> Any:
    return value
