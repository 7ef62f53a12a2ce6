"""Schema evolution on restore: identical, nullable field added (migrated), incompatible (clear error)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from epochal.state.descriptors import ValueStateDescriptor
from epochal.state.errors import MaxParallelismMismatch
from epochal.state.errors import RescaleError, StateMigrationError
from epochal.state.recovery.schema import SchemaVerdict, compare_schemas
from epochal.state.recovery.testing import LifecycleHarness
from epochal.state.recovery.restore import RestoreAction, StateTarget

pytestmark = pytest.mark.timeout(600)


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(n, t, True) for n, t in fields])


V1 = ValueStateDescriptor("total", value_type=_struct(("sum", T.LongType()), ("n", T.LongType())))
V2 = ValueStateDescriptor("total", value_type=_struct(("sum", T.LongType()), ("last", T.StringType()), ("n", T.LongType())))
BAD = ValueStateDescriptor("total", value_type=_struct(("sum", T.StringType()), ("n", T.LongType())))


def test_compare_schemas_verdicts() -> None:
    base = T.StructType([T.StructField("k", T.StringType(), False), T.StructField("v", V1.value_type)])
    assert compare_schemas(base, base).verdict is SchemaVerdict.IDENTICAL
    nested = T.StructType([base["k"], T.StructField("v", T.ArrayType(V2.value_type)), T.StructField("x", T.LongType())])
    listed = T.StructType([base["k"], T.StructField("v", T.ArrayType(V1.value_type))])
    assert compare_schemas(listed, nested).added == ("v.element.last", "x")
    removed = compare_schemas(nested, listed)
    assert (removed.verdict, removed.column) == (SchemaVerdict.INCOMPATIBLE, "x")
    required = T.StructType([*base.fields, T.StructField("y", T.LongType(), False)])
    assert "added as NOT NULL" in compare_schemas(base, required).problem


def test_restore_migrates_an_added_nullable_field_and_names_incompatible_columns(spark, tmp_path) -> None:
    h = LifecycleHarness(spark, tmp_path, with_operator=False, total=V1)
    h.run_epoch(0, {"a": (3, 1), "b": (4, 2)})

    h.reopen(V2)
    result = h.restore(1)
    state = result.state("agg", "total")
    assert (state.action, state.migrated_columns) == (RestoreAction.COPY, ("value.last",))
    assert h.totals() == {"a": (3, None, 1), "b": (4, None, 2)}
    h.run_epoch(1, {"a": (5, "x", 2)})  # the migrated table is the new descriptor's table
    assert h.totals() == {"a": (5, "x", 2), "b": (4, None, 2)}
    assert {s.action for s in h.restore(2).states} == {RestoreAction.UNCHANGED}, "identical schema: nothing to do"

    h.reopen(BAD)
    with pytest.raises(StateMigrationError) as failure:
        h.restore(1)
    assert failure.value.context["column"] == "value.sum"
    assert "State agg/total in checkpoint 1 cannot be migrated to its current descriptor: " \
           "column value.sum changed type from bigint to string." in str(failure.value)
    assert "only nullable fields may be added" in failure.value.action
    h.reopen(V2)
    assert h.totals() == {"a": (5, "x", 2), "b": (4, None, 2)}, "a refused restore changes nothing"

    wider = StateTarget(h.keyed.stage, V2, h.keyed.table_path(V2), max_parallelism=32)
    with pytest.raises(MaxParallelismMismatch, match="written with max parallelism 16; the pipeline now uses 32"):
        h.restore(1, targets=[wider])
    with pytest.raises(RescaleError, match="Parallelism 17 is above the max parallelism 16 of keyed state agg/total"):
        h.restore(1, parallelism=17)
