"""``spark.jit``: which compilers the driver's JVM runs, chosen before it starts.

A fresh JVM's optimizing compiler (C2) spends more CPU in a small epoch than the epoch itself; C1 alone ends
a run of one or two small epochs sooner, tiered compilation is faster after that (docs/performance.md).
The CLI's and Dagster's runs say how long they are before Spark starts (``tests/orchestration/
test_cli_clickstream.py`` and ``tests/pipeline/test_user_pipeline.py`` check ``jit`` in the run's report).
"""

from __future__ import annotations

import pytest

from epochal.config import ConfigError, SparkSettings, load_settings
from epochal.state import jvm_archive
from epochal.state.session import (
    QUICK_JIT, TINY_RUN_EPOCHS, TINY_RUN_INPUT_BYTES, LazySparkSession, driver_jit, is_short_run, spark_conf,
)

MB = 1024 * 1024


def _options(settings: SparkSettings, *, short: bool, environ=None) -> str:
    conf = spark_conf(settings, environ=environ or {jvm_archive.ENV: "off"}, short_run=short)
    return conf.get(jvm_archive.OPTION, "")


def test_auto_runs_c1_alone_only_for_a_short_run():
    auto = SparkSettings()
    assert auto.jit.value == "auto"
    assert QUICK_JIT in _options(auto, short=True)
    assert "TieredStopAtLevel" not in _options(auto, short=False)


@pytest.mark.parametrize("short", [True, False])
def test_an_explicit_choice_holds_whatever_the_run(short):
    assert QUICK_JIT in _options(SparkSettings(jit="quick"), short=short)
    assert "TieredStopAtLevel" not in _options(SparkSettings(jit="tiered"), short=short)


def test_the_quick_options_join_the_class_archive_and_the_users_own_options_win(tmp_path):
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"")
    environ = {jvm_archive.ENV: str(archive)}
    options = _options(SparkSettings(jit="quick"), short=True, environ=environ)
    assert options.startswith(f"-XX:SharedArchiveFile={archive}") and QUICK_JIT in options
    own = SparkSettings(jit="quick", conf={jvm_archive.OPTION: "-Xss4m"})
    assert _options(own, short=True, environ=environ) == "-Xss4m"


def test_a_short_run_is_one_or_two_epochs_of_small_state():
    settings = SparkSettings(codegen_min_mb=8)
    assert is_short_run(settings, 1, 0) and is_short_run(settings, 2, 7 * MB)
    assert not is_short_run(settings, 3, 0)  # a backfill, or a run catching up: C2 pays off
    assert not is_short_run(settings, 1, 8 * MB)  # large state: the epoch's own work dominates
    assert not is_short_run(settings, 0, 0)  # nothing to run


def test_a_few_epochs_of_tiny_known_input_are_a_short_run_too():
    settings = SparkSettings(codegen_min_mb=8)
    tiny, big = TINY_RUN_INPUT_BYTES - 1, TINY_RUN_INPUT_BYTES
    assert is_short_run(settings, 3, 0, tiny) and is_short_run(settings, TINY_RUN_EPOCHS, 0, tiny)
    assert not is_short_run(settings, TINY_RUN_EPOCHS + 1, 0, tiny)  # a backfill: C2 pays off however small
    assert not is_short_run(settings, 3, 0, big)  # 5k events an epoch: tiered from the third epoch
    assert not is_short_run(settings, 3, 0, None)  # a source that cannot say: as before
    assert not is_short_run(settings, 3, 8 * MB, tiny)  # large state


def test_the_run_input_is_the_sources_files_over_its_epochs_or_unknown(tmp_path):
    from datetime import datetime, timezone

    from epochal.config import Granularity
    from epochal.pipeline.partitions import Partitioning
    from epochal.pipeline.sources import HourlyFolderSource, run_input_bytes

    for hour, size in ((0, 100), (1, 0), (2, 250)):
        folder = tmp_path / "dt=2026-11-01" / f"hour={hour:02d}"
        folder.mkdir(parents=True)
        (folder / "part-0.jsonl").write_bytes(b"x" * size)
    infos = [Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY).info(e) for e in range(4)]
    source = HourlyFolderSource("landing", str(tmp_path))
    assert run_input_bytes([source], infos[:3]) == 350
    assert run_input_bytes([source], infos) == 350  # an hour not landed yet: no files
    assert run_input_bytes([source, source], infos[:1]) == 200

    class Planned:  # a source with plan() alone
        name = "other"

    assert run_input_bytes([source, Planned()], infos) is None


def test_a_bad_value_is_refused_naming_the_key(tmp_path):
    path = tmp_path / "epochal.yaml"
    path.write_text("spark:\n  jit: fast\n")
    with pytest.raises(ConfigError, match=r"spark\.jit"):
        load_settings(path)


def test_a_lazy_session_passes_what_it_was_told_to_its_factory_and_starts_once():
    made = []
    lazy = LazySparkSession(lambda short_run: made.append(short_run) or object())
    assert not lazy.expected and not lazy.started and driver_jit(lazy) is None
    lazy.expect(short_run=True)
    assert lazy.expected
    lazy.get()
    lazy.get()
    assert made == [True] and lazy.started


def test_the_test_sessions_driver_runs_the_quick_compiler(spark):
    # A pytest session runs thousands of small, different queries: C2 compiled them on the other worker's core
    # (tests/conftest.py). The product's long runs keep tiered compilation (test_auto_runs_c1_alone_only_for_a_short_run).
    assert driver_jit(spark) == "quick"
