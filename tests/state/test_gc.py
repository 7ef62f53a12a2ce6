"""``spark.gc``: the driver JVM's garbage collector, chosen before it starts (docs/performance.md)."""

from __future__ import annotations

import pytest

from epochal.config import ConfigError, SparkSettings, load_settings
from epochal.state import jvm_archive
from epochal.state.session import PARALLEL_GC, driver_gc, spark_conf


def _options(settings: SparkSettings, environ: dict[str, str] | None = None) -> str:
    return spark_conf(settings, environ={jvm_archive.ENV: "off", **(environ or {})}).get(jvm_archive.OPTION, "")


def test_the_throughput_collector_is_the_default_and_jvm_leaves_the_choice_to_the_jvm():
    assert SparkSettings().gc.value == "parallel"
    assert PARALLEL_GC in _options(SparkSettings()).split()
    assert "GC" not in _options(SparkSettings(gc="jvm"))


def test_it_joins_the_class_archive_and_the_quick_compiler(tmp_path):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"")
    conf = spark_conf(SparkSettings(jit="quick"), environ={jvm_archive.ENV: str(archive)})
    options = conf[jvm_archive.OPTION]
    assert options.startswith(f"-XX:SharedArchiveFile={archive}") and "-XX:TieredStopAtLevel=1" in options
    assert options.endswith(PARALLEL_GC)


@pytest.mark.parametrize("conf, environ", [
    ({"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseG1GC"}, {}),
    ({jvm_archive.OPTION: "-XX:+UseZGC"}, {}),
    ({}, {"JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC"}),
])
def test_a_collector_chosen_elsewhere_wins_for_the_jvm_starts_with_one_only(conf, environ):
    options = _options(SparkSettings(conf=conf), environ)
    assert PARALLEL_GC not in options


def test_the_session_of_the_tests_runs_the_throughput_collector(spark):
    collectors = driver_gc(spark)
    assert collectors and all(name.startswith("PS ") for name in collectors), collectors  # PS Scavenge, PS MarkSweep


def test_a_bad_value_is_refused_naming_the_key(tmp_path):
    path = tmp_path / "epochal.yaml"
    path.write_text("spark:\n  gc: cms\n")
    with pytest.raises(ConfigError, match=r"spark\.gc"):
        load_settings(path)
