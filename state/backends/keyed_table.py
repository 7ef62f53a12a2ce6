"""The keyed state table: its layout, what it records of its state, and the check of a table against a descriptor.

Every keyed state is one Delta table with rows

    key_group INT, key <key type>, namespace STRING, value <stored type>,
    expires_at TIMESTAMP (null: no TTL), updated_epoch BIGINT

and records its maximum parallelism, state type, value and key types in its Delta
properties. :func:`check_table` compares them with the current descriptor from the
Delta log alone (no Spark job): the backend does at a table's first use in a
process, and a run does for every declared state before its first epoch, so a
changed state is refused before anything is written.
"""

from __future__ import annotations

from pyspark.sql import types as T

from epochal.state.backends.values import check_value_type
from epochal.state.delta import io as delta_io
from epochal.state.descriptors import KeyedStateDescriptor
from epochal.state.errors import MaxParallelismMismatch, StateSchemaError

PROP_MAX_PARALLELISM = "epochal.maxParallelism"
PROP_STATE_TYPE = "epochal.stateType"
PROP_VALUE_TYPE = "epochal.valueType"
PROP_KEY_TYPE = "epochal.keyType"


def keyed_table_schema(descriptor: KeyedStateDescriptor) -> T.StructType:
    return T.StructType(
        [
            T.StructField("key_group", T.IntegerType(), False),
            T.StructField("key", descriptor.key_type, False),
            T.StructField("namespace", T.StringType(), False),
            T.StructField("value", descriptor.stored_type, True),
            T.StructField("expires_at", T.TimestampType(), True),
            T.StructField("updated_epoch", T.LongType(), False),
        ]
    )


def recorded_properties(descriptor: KeyedStateDescriptor, max_parallelism: int | None) -> dict[str, str]:
    """What a table records of its state (besides Delta's own table properties); :func:`check_table` reads them."""
    recorded = {
        PROP_STATE_TYPE: descriptor.state_type.value,
        PROP_VALUE_TYPE: descriptor.stored_type.json(),
        PROP_KEY_TYPE: descriptor.key_type.json(),
    }
    if max_parallelism is not None:
        recorded[PROP_MAX_PARALLELISM] = str(max_parallelism)
    return recorded


def check_table(stage: str, descriptor: KeyedStateDescriptor, path: str, max_parallelism: int) -> None:
    """Refuse an existing table that another maximum parallelism, state type or value type wrote (nothing when
    there is no table yet): :class:`MaxParallelismMismatch` or :class:`StateSchemaError`, naming the state."""
    if not delta_io.is_delta_table(path):
        return
    props = delta_io.table_properties(path)
    recorded = props.get(PROP_MAX_PARALLELISM)
    if recorded is not None and int(recorded) != max_parallelism:
        raise MaxParallelismMismatch(
            f"state {stage}/{descriptor.name} was created with max parallelism {recorded}, not {max_parallelism}",
            action="keep the max parallelism a state was created with (it fixes its key groups)",
            state=descriptor.name,
            path=path,
        )
    recorded_type = props.get(PROP_STATE_TYPE)
    if recorded_type is not None and recorded_type != descriptor.state_type.value:
        raise StateSchemaError(
            f"state {stage}/{descriptor.name} is {recorded_type} state, not {descriptor.state_type.value}",
            action="keep its descriptor's kind, or give the new state another name (the old one is then dropped by "
                   "`epochal restore --allow-non-restored-state`)",
            state=descriptor.name,
        )
    check_value_type(f"state {stage}/{descriptor.name}", descriptor.name, descriptor.stored_type, props.get(PROP_VALUE_TYPE))
