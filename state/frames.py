"""Empty DataFrames built in the JVM.

PySpark's ``spark.createDataFrame([], schema)`` (and ``spark.emptyDataFrame``, which calls it) pickles its
rows in Python and reads them back through a Python RDD: the job that scans the frame starts PySpark's
Python worker daemon, about a second of CPU the first time in a process and a round trip to a Python
worker every time after. An empty frame needs none of that: :func:`empty_frame` is Spark's own
``LocalRelation`` of no rows, made by the JVM, with exactly the schema given (nullability included).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T


def empty_frame(spark: SparkSession, schema: T.StructType | str) -> DataFrame:
    """A DataFrame of no rows with ``schema`` (a ``StructType`` or a DDL string), without Python workers."""
    from epochal.state.session import LazySparkSession

    if isinstance(spark, LazySparkSession):
        spark = spark.get()
    struct = schema if isinstance(schema, T.StructType) else T.DataType.fromDDL(schema)
    if not isinstance(struct, T.StructType):
        raise TypeError(f"empty_frame needs a struct schema, not {schema!r}")
    jschema = spark._jsparkSession.parseDataType(struct.json())
    return DataFrame(spark._jsparkSession.createDataFrame(spark._jvm.java.util.ArrayList(), jschema), spark)
