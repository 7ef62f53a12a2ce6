"""The driver JVM's class-data-sharing archive: written by the set-up step, mapped by every session."""

from __future__ import annotations

import json
import subprocess
import sys

from epochal.config import SparkSettings
from epochal.state import jvm_archive
from epochal.state.session import spark_conf

OPTION = "spark.driver.defaultJavaOptions"


def test_sessions_map_the_archive_only_when_it_exists(tmp_path):
    archive = tmp_path / "spark.jsa"
    env = {jvm_archive.ENV: str(archive)}
    assert OPTION not in spark_conf(SparkSettings(), environ=env), "no archive yet: no option"
    archive.write_bytes(b"written by the set-up step")
    options = spark_conf(SparkSettings(conf={"spark.driver.extraJavaOptions": "-Dmine=1"}), environ=env)
    assert f"-XX:SharedArchiveFile={archive}" in options[OPTION].split()
    assert options["spark.driver.extraJavaOptions"] == "-Dmine=1", "the user's own JVM options are left alone"
    assert OPTION not in spark_conf(SparkSettings(), environ={jvm_archive.ENV: "off"})
    own = spark_conf(SparkSettings(conf={OPTION: "-Xss4m"}), environ=env)
    assert own[OPTION] == "-Xss4m", "a configuration's own default JVM options replace ours"


def test_the_archive_path_depends_on_the_java_binary(tmp_path):
    base = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    one = jvm_archive.archive_path({**base, "JAVA_HOME": str(tmp_path / "jdk-a")})
    other = jvm_archive.archive_path({**base, "JAVA_HOME": str(tmp_path / "jdk-b")})
    assert one.parent == other.parent == tmp_path / ".cache" / "epochal" / "jvm"
    assert one != other


def test_a_new_archive_replaces_those_of_environments_that_are_gone(tmp_path):
    folder = tmp_path / "jvm"
    folder.mkdir()
    gone, alive = folder / "spark-4.2.0-aaaa.jsa", folder / "spark-4.2.0-bbbb.jsa"
    for archive, owner in ((gone, tmp_path / "deleted-venv"), (alive, tmp_path)):
        archive.write_bytes(b"archive")
        archive.with_suffix(".python").write_text(str(owner))
    partial = folder / "spark-4.2.0-cccc.jsa.123.partial"
    partial.write_bytes(b"new archive")
    jvm_archive.keep(partial, folder / "spark-4.2.0-cccc.jsa")
    assert sorted(p.name for p in folder.iterdir()) == [
        "spark-4.2.0-bbbb.jsa", "spark-4.2.0-bbbb.python", "spark-4.2.0-cccc.jsa", "spark-4.2.0-cccc.python",
    ]
    assert (folder / "spark-4.2.0-cccc.python").read_text() == sys.prefix


_CHILD = """
import json, sys
from epochal.config import SparkSettings
from epochal.state.session import build_spark_session
spark = build_spark_session(SparkSettings(master="local[1]", conf={"spark.driver.extraJavaOptions": "-Xshare:on"}))
args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
rows = spark.range(5).count()
print(json.dumps({"args": [str(a) for a in args], "rows": rows}))
"""


def test_the_set_up_step_left_an_archive_that_a_spark_driver_maps():
    """``make setup`` wrote the archive; a driver started with ``-Xshare:on`` (which refuses to start
    when the archive does not fit its JDK and class path) starts with it and runs a job."""
    archive = jvm_archive.archive_path()
    assert archive is not None and archive.is_file(), f"no JVM class archive at {archive}: run `make setup`"
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert f"-XX:SharedArchiveFile={archive}" in report["args"]
    assert report["args"].index("-Xshare:on") > report["args"].index(f"-XX:SharedArchiveFile={archive}")
    assert report["rows"] == 5
