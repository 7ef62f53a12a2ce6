"""Empty frames come from the JVM, and no shipped module builds a frame from Python rows.

``spark.createDataFrame(rows)`` ships pickled rows through a Python RDD: scanning the frame starts PySpark's
Python worker daemon (about a second of CPU the first time in a process: a fresh ``epochal run`` of the
example spent 1.2 s instead of 0.3 s writing the sessions' watermark state).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pyspark.sql import types as T

from epochal import empty_frame

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["state", "pipeline", "orchestration"]
SCHEMA = T.StructType([
    T.StructField("key", T.StringType(), False),
    T.StructField("at", T.TimestampType(), True),
    T.StructField("items", T.MapType(T.StringType(), T.ArrayType(T.StructType([T.StructField("n", T.LongType())])))),
])


def _plan(frame) -> str:
    return frame._jdf.queryExecution().analyzed().getClass().getSimpleName()


@pytest.mark.parametrize("schema", [SCHEMA, "key string, n bigint"], ids=["struct", "ddl"])
def test_an_empty_frame_is_a_local_relation_of_exactly_the_schema(spark, schema, tmp_path):
    frame = empty_frame(spark, schema)
    expected = schema if isinstance(schema, T.StructType) else T._parse_datatype_string(schema)
    assert frame.schema == expected  # nullability included
    assert _plan(frame) == "LocalRelation"
    assert _plan(spark.createDataFrame([], expected)) != "LocalRelation"  # what it replaces: a Python RDD
    frame.write.format("delta").save(str(tmp_path / "t"))
    assert spark.read.format("delta").load(str(tmp_path / "t")).count() == 0


def test_a_schema_that_is_not_a_struct_is_refused_by_name(spark):
    with pytest.raises(TypeError, match="'int'"):
        empty_frame(spark, "int")


def _python_row_frames(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "createDataFrame"
            and ast.unparse(node.func.value) != "spark._jsparkSession"]  # the JVM's own, in empty_frame


def test_no_shipped_module_builds_a_frame_from_python_rows():
    """Every epoch of every pipeline runs this code: its frames come from files, tables, literals or
    :func:`empty_frame`. Test helpers (``testing.py``) may ship rows."""
    found = [hit for layer in SHIPPED for path in sorted((ROOT / layer).rglob("*.py"))
             if path.name != "testing.py" for hit in _python_row_frames(path)]
    assert found == [], f"spark.createDataFrame starts Python workers in an epoch: {found}"
