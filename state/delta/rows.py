"""A Delta table version's rows in this process, read by delta-rs: ``epochal state read`` without a JVM.

delta-rs (``deltalake``) reads the version through its query engine, deletion vectors applied, on a local or
S3 location; the rows come out as PySpark's ``Row.asDict(recursive=True)`` gives them (timestamps as naive
local datetimes, maps as dicts), so a reader sees the same rows whichever engine read them. Other locations
(a Hadoop file system delta-rs does not speak) are read by Spark.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from epochal.state.delta.objectstore import delta_rs_options, delta_rs_reaches as readable_in_process
from epochal.state.delta.paths import to_url


def read_rows(location: str, version: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of ``version`` (default: the latest) of the Delta table at ``location``, at most ``limit``."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    url = to_url(location)
    table = DeltaTable(url, version=version, storage_options=delta_rs_options(url, os.environ))
    sql = "SELECT * FROM state" + ("" if limit is None else f" LIMIT {int(limit)}")
    # RecordBatchReader.from_stream, not pa.table(): the latter imports pandas to ask whether this is a DataFrame (1 s)
    data = pa.RecordBatchReader.from_stream(QueryBuilder().register("state", table).execute(sql)).read_all()
    columns = [(field.name, field.type, data.column(field.name).to_pylist()) for field in data.schema]
    return [{name: _as_spark(values[i], kind) for name, kind, values in columns} for i in range(data.num_rows)]


def _as_spark(value: Any, kind: Any) -> Any:
    """``value`` of arrow type ``kind`` as PySpark returns it."""
    import pyarrow.types as t

    if value is None:
        return None
    if t.is_timestamp(kind):
        # PySpark's TimestampType: a naive datetime in this process's time zone; TimestampNTZType: naive as stored.
        return value.astimezone().replace(tzinfo=None) if isinstance(value, datetime) and value.tzinfo else value
    if t.is_map(kind):
        return {_as_spark(k, kind.key_type): _as_spark(v, kind.item_type) for k, v in value}
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind) or t.is_list_view(kind):
        return [_as_spark(v, kind.value_type) for v in value]
    if t.is_struct(kind):
        return {kind.field(i).name: _as_spark(value[kind.field(i).name], kind.field(i).type) for i in range(kind.num_fields)}
    return value
