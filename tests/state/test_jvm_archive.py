"""The driver JVM's class-data-sharing archive: written by the set-up step, mapped by every session."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from epochal.config import SparkSettings
from epochal.state import jvm_archive
from epochal.state.session import spark_conf

OPTION = "spark.driver.defaultJavaOptions"


def test_sessions_map_the_archive_only_when_it_exists(tmp_path):
    archive = tmp_path / "spark.jsa"
    env = {jvm_archive.ENV: str(archive)}
    assert "SharedArchiveFile" not in spark_conf(SparkSettings(), environ=env).get(OPTION, ""), "no archive yet"
    archive.write_bytes(b"written by the set-up step")
    options = spark_conf(SparkSettings(conf={"spark.driver.extraJavaOptions": "-Dmine=1"}), environ=env)
    assert f"-XX:SharedArchiveFile={archive}" in options[OPTION].split()
    assert options["spark.driver.extraJavaOptions"] == "-Dmine=1", "the user's own JVM options are left alone"
    assert "SharedArchiveFile" not in spark_conf(SparkSettings(), environ={jvm_archive.ENV: "off"}).get(OPTION, "")
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
    java = jvm_archive._java(os.environ)
    owners = {
        "aaaa": str(tmp_path / "deleted-venv"),  # an environment that is gone
        "bbbb": str(tmp_path),  # another live environment (a note of before the java line)
        "dddd": f"{sys.prefix}\n{java}",  # this environment and java, before its jars changed: superseded
        "eeee": f"{sys.prefix}\n{tmp_path / 'other-jdk' / 'java'}",  # this environment with another java
        "ffff": sys.prefix,  # this environment, a note of before the java line: superseded too
    }
    for key, owner in owners.items():
        (folder / f"spark-4.2.0-{key}.jsa").write_bytes(b"archive")
        (folder / f"spark-4.2.0-{key}.python").write_text(owner)
    partial = folder / "spark-4.2.0-cccc.jsa.123.partial"
    partial.write_bytes(b"new archive")
    jvm_archive.keep(partial, folder / "spark-4.2.0-cccc.jsa")
    assert sorted(p.name for p in folder.glob("*.jsa")) == ["spark-4.2.0-bbbb.jsa", "spark-4.2.0-cccc.jsa", "spark-4.2.0-eeee.jsa"]
    assert sorted(p.name for p in folder.glob("*.python")) == [
        "spark-4.2.0-bbbb.python", "spark-4.2.0-cccc.python", "spark-4.2.0-eeee.python",
    ]
    assert (folder / "spark-4.2.0-cccc.python").read_text() == f"{sys.prefix}\n{java}"


def test_replaced_jars_get_another_archive(tmp_path):
    """The JVM refuses an archive whose class-path jars changed (size or modification time): a virtualenv
    re-created at the same path must not keep pointing at the old one."""
    jar = tmp_path / "spark-core.jar"
    jar.write_bytes(b"classes")
    before = jvm_archive.jars_fingerprint(tmp_path)
    assert jvm_archive.jars_fingerprint(tmp_path) == before
    (tmp_path / "notes.txt").write_text("not a jar")
    assert jvm_archive.jars_fingerprint(tmp_path) == before
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert jvm_archive.jars_fingerprint(tmp_path) != before
    assert jvm_archive.jars_fingerprint(tmp_path / "missing") == ""


_CHILD = """
import json, sys
from epochal.config import SparkSettings
from epochal.state.session import build_spark_session
options = f"-Xshare:on -Xlog:class+load=info:file={sys.argv[1]}"
spark = build_spark_session(SparkSettings(master="local[1]", conf={"spark.driver.extraJavaOptions": options}))
args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
rows = spark.range(5).count()
print(json.dumps({"args": [str(a) for a in args], "rows": rows}))
"""


def test_the_set_up_step_left_an_archive_that_a_spark_driver_maps(tmp_path):
    """``make setup`` wrote the archive; a driver started with ``-Xshare:on`` (which refuses to start
    when the archive does not fit its JDK and class path) starts with it and runs a job, and Delta's
    classes, on a local driver's class path, come from the archive."""
    archive = jvm_archive.archive_path()
    assert archive is not None and archive.is_file(), f"no JVM class archive at {archive}: run `make setup`"
    loaded = tmp_path / "class-load.log"
    child = subprocess.run([sys.executable, "-c", _CHILD, str(loaded)], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert f"-XX:SharedArchiveFile={archive}" in report["args"]
    assert report["args"].index("-Xshare:on") > report["args"].index(f"-XX:SharedArchiveFile={archive}")
    assert report["rows"] == 5
    extension = [line for line in loaded.read_text().splitlines() if " io.delta.sql.DeltaSparkSessionExtension " in line]
    assert extension and "shared objects file" in extension[0], extension
