"""The session's py4j view remembers classes and static methods, and nothing that may change."""

from __future__ import annotations

import pytest
from py4j.java_gateway import JavaClass
from py4j.protocol import Py4JError
from pyspark.sql import functions as F

REFLECTION = "r\n"  # py4j's reflection command: look a name up (a class, a package, a static member)


@pytest.fixture
def sent(spark, monkeypatch):
    """The py4j commands the driver sends from now on, by kind (their first line)."""
    client = spark.sparkContext._gateway._gateway_client
    commands: list[str] = []
    send = client.send_command

    def counting(command, *args, **kwargs):
        commands.append(command)
        return send(command, *args, **kwargs)

    monkeypatch.setattr(client, "send_command", counting)
    return commands


def _lookups(commands: list[str]) -> list[str]:
    return [c.split("\n")[2] for c in commands if c.startswith(REFLECTION)]


def test_a_column_function_and_a_helper_are_looked_up_once(spark, sent):
    spark.range(1).select(F.col("id"), F.lit(1)).collect()  # looked up at most once each
    sent.clear()
    rows = spark.range(3).select((F.col("id") + F.lit(1)).alias("x")).where(F.col("x") > 1).collect()
    assert [r.x for r in rows] == [2, 3]
    assert _lookups(sent) == []
    assert len(sent) > 0  # the calls themselves still go to the JVM


def test_static_fields_and_names_not_found_are_asked_each_time(spark, sent):
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    sent.clear()
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert _lookups(sent) == ["java.lang.Integer"]  # the field, not the packages or the class again
    sent.clear()
    for _ in range(2):  # py4j answers "a package" for a name it finds no class for: asked again each time
        with pytest.raises(Py4JError, match="does not exist"):
            jvm.java.lang.Integer.noSuchMethodAnywhere()
        assert not isinstance(jvm.java.lang.NoSuchClassAnywhere, JavaClass)
    assert _lookups(sent).count("java.lang.NoSuchClassAnywhere") == 2
    assert _lookups(sent).count("java.lang.Integer") == 2


def test_packages_and_classes_found_are_the_same_objects_next_time(spark):
    jvm = spark.sparkContext._jvm
    assert jvm.org.apache.spark.sql.functions is jvm.org.apache.spark.sql.functions
    assert jvm.PythonUtils.toSeq is jvm.PythonUtils.toSeq
    assert jvm.java.util.ArrayList is jvm.java.util.ArrayList
    assert jvm.java.util.ArrayList().size() == 0  # a remembered class still constructs
