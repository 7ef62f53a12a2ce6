"""The jars Ivy resolved for a list of packages are recorded once; later sessions name them instead of resolving."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from epochal.state import resolved_jars
from epochal.state.resolved_jars import IVY, JARS, PACKAGES


def _jars(tmp_path, *names):
    paths = []
    for name in names:
        path = tmp_path / "ivy" / "jars" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PK")
        paths.append(f"file://{path}")
    return paths


def test_a_record_is_used_only_while_every_file_it_names_exists(tmp_path):
    env = {resolved_jars.ENV: str(tmp_path / "records")}
    conf = {PACKAGES: "io.delta:delta-spark_4.2_2.13:4.4.0", "spark.master": "local[2]"}
    assert resolved_jars.recorded(conf, env) is None, "nothing recorded yet"
    jars = _jars(tmp_path, "delta-spark.jar", "delta-storage.jar")
    assert resolved_jars.remember(conf, ",".join(jars), env) is not None
    assert resolved_jars.recorded(conf, env) == jars
    assert resolved_jars.recorded({**conf, PACKAGES: conf[PACKAGES] + ",org.apache.hadoop:hadoop-aws:3.4.2"}, env) is None
    assert resolved_jars.recorded({**conf, IVY: str(tmp_path / "other-ivy")}, env) is None, "another Ivy folder"
    os.unlink(jars[1][len("file://"):])
    assert resolved_jars.recorded(conf, env) is None, "a file gone: Spark resolves again"


def test_a_configuration_with_its_own_jars_settings_resolves_as_before(tmp_path):
    env = {resolved_jars.ENV: str(tmp_path / "records")}
    jars = _jars(tmp_path, "delta-spark.jar")
    for own in ({JARS: "/opt/mine.jar"}, {"spark.jars.repositories": "https://repo.example/maven"}):
        conf = {PACKAGES: "io.delta:delta-spark_4.2_2.13:4.4.0", **own}
        assert not resolved_jars.applies(conf)
        assert resolved_jars.remember(conf, ",".join(jars), env) is None
        assert resolved_jars.recorded(conf, env) is None
    off = {resolved_jars.ENV: "off"}
    assert resolved_jars.remember({PACKAGES: "a:b:1"}, ",".join(jars), off) is None
    assert resolved_jars.recorded({PACKAGES: "a:b:1"}, off) is None
    assert resolved_jars.remember({PACKAGES: "a:b:1"}, ",".join([*jars, "file:///no/such.jar"]), env) is None


_CHILD = """
import json, sys
from epochal.config import SparkSettings
from epochal.state.session import build_spark_session
spark = build_spark_session(SparkSettings(master="local[1]"), app_name="resolved-jars-test")
table = sys.argv[1]
if sys.argv[2] == "write":
    spark.range(5).write.format("delta").save(table)
conf = spark.sparkContext.getConf()
print(json.dumps({"packages": conf.get("spark.jars.packages", None), "jars": conf.get("spark.jars", ""),
                  "class_path": str(spark._jvm.java.lang.System.getProperty("java.class.path")),
                  "rows": spark.read.format("delta").load(table).count()}))
"""


@pytest.mark.slow
def test_the_second_session_names_the_jars_the_first_resolved_and_delta_works(tmp_path):
    from epochal.state.driver_jars import delta_packages

    env = {**os.environ, resolved_jars.ENV: str(tmp_path / "records")}
    table = str(tmp_path / "table")

    def child(step: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _CHILD, table, step], env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = child("write")
    assert first["packages"] == delta_packages(), "nothing recorded: the first session resolves the packages"
    record = json.loads(resolved_jars.record_path(first["packages"], None, env).read_text())
    assert record["jars"] == first["jars"].split(",") and any("delta-spark" in j for j in record["jars"])
    second = child("read")
    assert second["packages"] is None, "the second session resolves nothing"
    assert second["jars"] == "", "a local session's executor fetches no jars"
    class_path = second["class_path"].split(os.pathsep)
    assert class_path[-len(record["jars"]):] == [resolved_jars.local_path(j) for j in record["jars"]], \
        "the recorded jars end the driver's class path, in their order"
    assert first["rows"] == second["rows"] == 5, "Delta works from the named jars"


def test_a_local_session_puts_the_jars_on_the_drivers_class_path_delta_s_own_first(tmp_path, monkeypatch):
    from epochal.state.driver_jars import default_class_path, delta_packages, driver_class_path

    monkeypatch.setenv(resolved_jars.ENV, str(tmp_path / "records"))
    delta = _jars(tmp_path, "delta-spark.jar", "delta-storage.jar")
    s3 = _jars(tmp_path, "hadoop-aws.jar", "bundle.jar")
    assert default_class_path() == [] and driver_class_path("local[2]", s3) == [p[len("file://"):] for p in s3]
    resolved_jars.remember({PACKAGES: delta_packages()}, ",".join(delta))
    local = [p[len("file://"):] for p in delta + s3]
    assert default_class_path() == local[:2]
    # S3A's list as Ivy gave it (its own jars first): Delta's jars are put first, where the archive has them.
    assert driver_class_path("local[*]", [s3[0], delta[1], s3[1], delta[0]]) == local
    assert driver_class_path("spark://127.0.0.1:7077", delta + s3) == [], "a cluster's executors need spark.jars"
