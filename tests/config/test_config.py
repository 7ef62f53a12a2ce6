"""The config package: loading, environment overrides, validation messages, paths, docs."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from epochal.config import (
    CheckpointMode,
    CheckpointSettings,
    ConfigError,
    Granularity,
    Settings,
    dump_settings,
    env_var_name,
    load_settings,
    settings_json_schema,
)
from epochal.config.docs import render_configuration_markdown
from epochal.config.fields import format_duration
from epochal.config.models import iter_fields, section_model
from tests.support.paths import ROOT

EXAMPLE = ROOT / "config" / "example.yaml"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (relative paths resolve here when no file is given)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def write(path: Path, text: str) -> Path:
    """Write a config file and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load_error(path: str | Path | None = None, env: dict[str, str] | None = None) -> ConfigError:
    """The ConfigError raised by load_settings."""
    with pytest.raises(ConfigError) as info:
        load_settings(path, env=env or {})
    return info.value


# --------------------------------------------------------------------------- loading


def _options(settings: Settings):
    """The clickstream example's options (its own pydantic model validates ``options:``)."""
    from epochal.pipeline.examples.clickstream.options import ClickstreamOptions

    return settings.pipeline_options(ClickstreamOptions)


def test_defaults_load_without_a_file(workdir: Path) -> None:
    settings = load_settings(env={})
    assert settings.pipeline == "clickstream"
    assert settings.checkpoints.retain == 3
    assert settings.checkpoints.mode is CheckpointMode.INCREMENTAL
    assert settings.partitions.granularity is Granularity.HOURLY
    assert settings.partitions.start == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert _options(settings).dedupe_ttl == timedelta(days=7)
    assert _options(settings).session_gap == timedelta(minutes=30)
    assert _options(settings).allowed_lateness == timedelta(hours=1)
    assert settings.dagster.webserver_port == 3000 and settings.dagster.schedule_enabled
    assert settings.landing == str(workdir / "data" / "landing")
    assert settings == Settings().resolve_paths(workdir)


def test_yaml_file_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path / "epochal.yaml",
        """
pipeline: clickstream
landing: s3://bucket/landing
checkpoints:
  dir: memory://ckpt
  retain: 5
  mode: full
  timeout_s: 30
spark:
  master: local[2]
  conf:
    spark.sql.shuffle.partitions: 4
    spark.sql.adaptive.enabled: false
partitions:
  granularity: daily
  start: 2026-11-02
options:
  session_gap: 45m
dagster:
  webserver_port: 3100
""",
    )
    settings = load_settings(path, env={})
    assert settings.landing == "s3://bucket/landing"
    assert settings.checkpoints.dir == "memory://ckpt"
    assert settings.checkpoints.retain == 5
    assert settings.checkpoints.mode is CheckpointMode.FULL
    assert settings.checkpoints.timeout_s == 30.0
    assert settings.spark.master == "local[2]"
    assert settings.spark.conf == {"spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "false"}
    assert settings.partitions.granularity is Granularity.DAILY
    assert settings.partitions.start == datetime(2026, 11, 2, tzinfo=timezone.utc)
    assert _options(settings).session_gap == timedelta(minutes=45)
    assert settings.dagster.webserver_port == 3100


def test_empty_file_and_empty_sections_mean_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path / "empty.yaml", ""), env={}).checkpoints.retain == 3
    settings = load_settings(write(tmp_path / "sections.yaml", "checkpoints:\nspark:\n"), env={})
    assert settings.checkpoints == CheckpointSettings().model_copy(update={"dir": str(tmp_path / "data/checkpoints")})


def test_yaml_12_scalars(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "pipeline: on\noptions:\n  session_gap: '1:30:00'\n")
    settings = load_settings(path, env={})
    assert settings.pipeline == "on"  # not a boolean
    assert _options(settings).session_gap == timedelta(hours=1, minutes=30)


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.checkpoints.retain = 9  # type: ignore[misc]


# --------------------------------------------------------------------------- environment


def test_env_overrides_beat_yaml(tmp_path: Path) -> None:
    path = write(tmp_path / "epochal.yaml", "landing: /from/file\ncheckpoints:\n  retain: 2\nspark:\n  master: local[1]\n")
    env = {
        "EPOCHAL__CHECKPOINTS__RETAIN": "5",
        "EPOCHAL__SPARK__MASTER": "local[2]",
        "EPOCHAL__LANDING": "/x",
        "EPOCHAL__SPARK__UI_ENABLED": "true",
        "EPOCHAL_IVY_DIR": "/not/ours",  # single underscore: not an override
        "HOME": "/root",
    }
    settings = load_settings(path, env=env)
    assert settings.checkpoints.retain == 5
    assert settings.spark.master == "local[2]"
    assert settings.landing == "/x"
    assert settings.spark.ui_enabled is True


def test_env_names_are_case_insensitive() -> None:
    settings = load_settings(env={"epochal__Checkpoints__mode": "full", "Epochal__options__dedupe_ttl": "P1D"})
    assert settings.checkpoints.mode is CheckpointMode.FULL
    assert _options(settings).dedupe_ttl == timedelta(days=1)


def test_env_values_keep_text_for_string_fields_and_empty_means_null() -> None:
    settings = load_settings(
        env={
            "EPOCHAL__PIPELINE": "on",
            "EPOCHAL__SPARK__DRIVER_MEMORY": "4096",
            "EPOCHAL__SPARK__SHUFFLE_PARTITIONS": "",
            "EPOCHAL__SPARK__CONF": "{spark.sql.ansi.enabled: false}",
            "EPOCHAL__SPARK__CONF__spark.ui.port": "4050",
            "EPOCHAL__PARTITIONS__START": "2026-11-01T05:00:00+02:00",
        }
    )
    assert settings.pipeline == "on"
    assert settings.spark.driver_memory == "4096"
    assert settings.spark.shuffle_partitions is None
    assert settings.spark.conf == {"spark.sql.ansi.enabled": "false", "spark.ui.port": "4050"}
    assert settings.partitions.start == datetime(2026, 11, 1, 3, tzinfo=timezone.utc)


@given(st.integers(min_value=1, max_value=10**9), st.sampled_from(["EPOCHAL__CHECKPOINTS__RETAIN", "epochal__checkpoints__retain"]))
def test_any_valid_retain_round_trips_through_env(retain: int, name: str) -> None:
    assert load_settings(env={name: str(retain)}).checkpoints.retain == retain


@given(st.integers(min_value=-(10**6), max_value=0))
def test_any_invalid_retain_is_named_with_its_variable(retain: int) -> None:
    error = load_error(env={"EPOCHAL__CHECKPOINTS__RETAIN": str(retain)})
    assert (error.key, error.value, error.source) == ("checkpoints.retain", retain, "EPOCHAL__CHECKPOINTS__RETAIN")
    assert str(error) == f"config error in EPOCHAL__CHECKPOINTS__RETAIN: checkpoints.retain = {retain}: must be >= 1"


def test_env_var_name() -> None:
    assert env_var_name("checkpoints.retain") == "EPOCHAL__CHECKPOINTS__RETAIN"
    assert env_var_name("landing") == "EPOCHAL__LANDING"


# --------------------------------------------------------------------------- errors


def test_unknown_key_in_yaml_names_key_suggestion_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "epochal.yaml", "checkpoints:\n  retian: 5\n")
    error = load_error(path)
    assert error.key == "checkpoints.retian"
    assert error.source == str(path) and error.line == 2
    assert "unknown key 'checkpoints.retian' (did you mean 'checkpoints.retain'?)" in str(error)
    assert str(error).startswith(f"config error in {path}, line 2: ")


def test_unknown_top_level_key_lists_allowed_keys(tmp_path: Path) -> None:
    error = load_error(write(tmp_path / "c.yaml", "zzz: 1\n"))
    assert "unknown key 'zzz' (allowed here: pipeline, landing, warehouse, checkpoints" in str(error)


def test_unknown_key_in_env_names_the_variable() -> None:
    error = load_error(env={"EPOCHAL__CHECKPOINTS__RETIAN": "5"})
    assert error.source == "EPOCHAL__CHECKPOINTS__RETIAN"
    assert error.key == "checkpoints.retian"
    assert str(error) == (
        "config error in EPOCHAL__CHECKPOINTS__RETIAN: unknown key 'checkpoints.retian' (did you mean 'checkpoints.retain'?)"
    )
    assert "EPOCHAL__NOPE" in str(load_error(env={"EPOCHAL__NOPE": "1"}))
    month13 = load_error(env={"EPOCHAL__PARTITIONS__START": "2026-13-01"})
    assert (month13.key, month13.source) == ("partitions.start", "EPOCHAL__PARTITIONS__START"), str(month13)
    assert "'landing' has no sub-keys" in str(load_error(env={"EPOCHAL__LANDING__X": "1"}))


def test_a_quoted_number_is_read_as_the_number_it_spells(tmp_path: Path) -> None:
    """As docs/configuration.md says ("YAML"): the file's quotes do not make a number key's value an error."""
    settings = load_settings(write(tmp_path / "epochal.yaml", 'checkpoints:\n  retain: "5"\ndagster:\n  backfill_chunk: "2"\n'))
    assert (settings.checkpoints.retain, settings.dagster.backfill_chunk) == (5, 2)
    assert "checkpoints.retain = 'true': must be an integer" in str(load_error(write(tmp_path / "bad.yaml",
                                                                                       'checkpoints:\n  retain: "true"\n')))


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("checkpoints:\n  retain: 0\n", "checkpoints.retain = 0: must be >= 1"),
        ("checkpoints:\n  retain: many\n", "checkpoints.retain = 'many': must be an integer"),
        ("checkpoints:\n  retain: 2.5\n", "checkpoints.retain = 2.5: must be an integer"),
        ("checkpoints:\n  retain: true\n", "checkpoints.retain = true: must be a number, not true/false"),
        ("checkpoints:\n  tolerable_failures: -1\n", "checkpoints.tolerable_failures = -1: must be >= 0"),
        ("checkpoints:\n  timeout_s: 0\n", "checkpoints.timeout_s = 0: must be > 0"),
        ("checkpoints:\n  mode: fast\n", "checkpoints.mode = 'fast': must be 'incremental' or 'full'"),
        ("checkpoints: 5\n", "checkpoints = 5: must be a mapping"),
        ("spark:\n  master: 'foo://'\n", "spark.master = 'foo://': must look like local, local[N]"),
        ("spark:\n  parallelism: 8\n  max_parallelism: 4\n", "spark.max_parallelism = 4: must be >= spark.parallelism (8)"),
        ("spark:\n  driver_memory: lots\n", "spark.driver_memory = 'lots': must be a JVM memory size"),
        ("spark:\n  ui_enabled: maybe\n", "spark.ui_enabled = 'maybe': must be true or false"),
        ("partitions:\n  granularity: weekly\n", "partitions.granularity = 'weekly': must be 'hourly' or 'daily'"),
        ("partitions:\n  start: soon\n", "partitions.start = 'soon': must be a date or datetime"),
        # dates PyYAML cannot construct: its own ValueError named neither the key nor the line
        ("partitions:\n  start: 2026-13-01\n", "partitions.start = '2026-13-01': must be a date or datetime"),
        ("partitions:\n  start: 2026-02-30\n", "partitions.start = '2026-02-30': must be a date or datetime"),
        ("partitions:\n  start: 2026-11-01T25:00:00Z\n", "partitions.start = '2026-11-01T25:00:00Z': must be a date or"),
        ("partitions:\n  start: 2026-11-01T00:30:00Z\n", "partitions.start = 2026-11-01T00:30:00Z: must be on the hour"),
        ("partitions:\n  granularity: daily\n  start: 2026-11-01T01:00:00Z\n", "partitions.start = 2026-11-01T01:00:00Z: must be midnight UTC"),
        ("dagster:\n  webserver_port: 70000\n", "dagster.webserver_port = 70000: must be <= 65535"),
        ("dagster:\n  home: s3://b/dagster\n", "dagster.home = 's3://b/dagster': must be a local directory path, not a URL"),
        ("pipeline: 'click stream'\n", "pipeline = 'click stream': must be a pipeline name (letters, digits, underscores) or an import path"),
        ("landing: ''\n", "landing = '': must not be empty"),
        ("warehouse: 'foo://x'\n", "warehouse = 'foo://x': unknown URL scheme 'foo://'"),
        ("warehouse: 's3:/bucket'\n", "warehouse = 's3:/bucket': looks like a URL without '//'"),
        ("checkpoints:\n  dir: 's3://'\n", "checkpoints.dir = 's3://': URL 's3://' has nothing after 's3://'"),
    ],
)
def test_bad_values_are_named_with_what_is_allowed(tmp_path: Path, yaml_text: str, expected: str) -> None:
    path = write(tmp_path / "epochal.yaml", yaml_text)
    error = load_error(path)
    first_line = str(error).splitlines()[0]
    assert first_line.startswith(f"config error in {path}, line ")
    assert expected in first_line
    assert error.key == expected.split(" ")[0]
    assert error.source == str(path)


def test_every_error_is_listed_first_one_first(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", "checkpoints:\n  retain: 0\n  mode: fast\nspark:\n  master: foo://\n")
    error = load_error(path)
    lines = str(error).splitlines()
    assert lines[0] == f"config error in {path}, line 2: checkpoints.retain = 0: must be >= 1 (and 2 more errors)"
    assert "checkpoints.mode = 'fast'" in lines[1] and "line 3" in lines[1]
    assert "spark.master = 'foo://'" in lines[2] and "line 5" in lines[2]
    assert [issue.key for issue in error.issues] == ["checkpoints.retain", "checkpoints.mode", "spark.master"]
    assert error.summary == lines[0]


def test_error_source_follows_the_value(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", "checkpoints:\n  mode: fast\n")
    error = load_error(path, env={"EPOCHAL__SPARK__PARALLELISM": "0"})
    sources = {issue.key: issue.source for issue in error.issues}
    assert sources == {"checkpoints.mode": str(path), "spark.parallelism": "EPOCHAL__SPARK__PARALLELISM"}


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    error = load_error(missing)
    assert error.source == str(missing)
    assert str(error) == f"config error in {missing}: no such file"


def test_yaml_syntax_error_gives_path_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "checkpoints:\n  retain: [1\nspark: {}\n")
    error = load_error(path)
    assert error.line == 3
    assert str(error).startswith(f"config error in {path}, line 3: invalid YAML at column 6: ")


def test_file_must_be_a_mapping_and_keys_unique(tmp_path: Path) -> None:
    assert "must hold a mapping" in str(load_error(write(tmp_path / "list.yaml", "- 1\n")))
    error = load_error(write(tmp_path / "dup.yaml", "landing: /a\nlanding: /b\n"))
    assert "duplicate key 'landing' (also on line 1)" in str(error) and error.line == 2


def test_config_error_pickles_and_can_be_raised_directly() -> None:
    error = load_error(env={"EPOCHAL__CHECKPOINTS__RETAIN": "0", "EPOCHAL__CHECKPOINTS__MODE": "fast"})
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.key == error.key and len(copy.issues) == 2
    direct = ConfigError("must be a known pipeline", key="pipeline", value="nope", source="epochal.yaml")
    assert str(direct) == "config error in epochal.yaml: pipeline = 'nope': must be a known pipeline"


# --------------------------------------------------------------------------- paths


def test_relative_paths_resolve_against_the_file_directory(tmp_path: Path, workdir: Path) -> None:
    deploy = tmp_path / "deploy"
    path = write(
        deploy / "epochal.yaml",
        "landing: in\nwarehouse: ../shared/wh\ncheckpoints:\n  dir: file:///ckpt\n  savepoints_dir: ~/sp\ndagster:\n  home: dh\n",
    )
    settings = load_settings(path, env={"EPOCHAL__CHECKPOINTS__DIR": "from_env"})
    assert settings.landing == str(deploy / "in")
    assert settings.warehouse == str(tmp_path / "shared" / "wh")
    assert settings.checkpoints.dir == str(workdir / "from_env")  # env values: relative to the working directory
    assert settings.checkpoints.savepoints_dir == str(Path.home() / "sp")
    assert settings.dagster.home == str(deploy / "dh")


def test_defaults_resolve_against_the_file_directory_and_urls_stay(tmp_path: Path) -> None:
    path = write(tmp_path / "d" / "epochal.yaml", "warehouse: s3a://bucket/wh\n")
    settings = load_settings(path, env={})
    assert settings.landing == str(tmp_path / "d" / "data" / "landing")
    assert settings.warehouse == "s3a://bucket/wh"


def test_effective_savepoints_dir() -> None:
    assert CheckpointSettings(dir="s3://b/ckpt/").effective_savepoints_dir == "s3://b/ckpt/savepoints"
    assert CheckpointSettings(dir="/c").effective_savepoints_dir == "/c/savepoints"
    assert CheckpointSettings(dir="/c", savepoints_dir="gs://sp").effective_savepoints_dir == "gs://sp"


@pytest.mark.parametrize("location", ["data/x", "/abs/x", "~/x", "file:///x", "s3://b/x", "s3a://b/x", "memory://x", "gs://b/x", "abfs://c@a/x", "C:/x"])
def test_accepted_locations(location: str) -> None:
    assert Settings(landing=location).landing == location


# --------------------------------------------------------------------------- value forms


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("7d", timedelta(days=7)),
        ("1h", timedelta(hours=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2w", timedelta(weeks=2)),
        ("500ms", timedelta(milliseconds=500)),
        ("PT30M", timedelta(minutes=30)),
        ("P7D", timedelta(days=7)),
        (1800, timedelta(minutes=30)),
        ("1800", timedelta(minutes=30)),
        (90.5, timedelta(seconds=90.5)),
        ("00:30:00", timedelta(minutes=30)),
    ],
)
def test_durations_parse(written: object, expected: timedelta) -> None:
    assert _options(Settings.model_validate({"options": {"session_gap": written}})).session_gap == expected


@given(st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=10_000)))
def test_durations_round_trip_through_their_shorthand(value: timedelta) -> None:
    settings = Settings.model_validate({"options": {"dedupe_ttl": format_duration(value)}})
    assert _options(settings).dedupe_ttl == value


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("2026-11-01", datetime(2026, 11, 1, tzinfo=timezone.utc)),
        ("2026-11-01T00:00:00Z", datetime(2026, 11, 1, tzinfo=timezone.utc)),
        ("2026-11-01T13:00:00", datetime(2026, 11, 1, 13, tzinfo=timezone.utc)),  # naive: UTC
        (datetime(2026, 11, 1, 13), datetime(2026, 11, 1, 13, tzinfo=timezone.utc)),
    ],
)
def test_partition_start_forms(written: object, expected: datetime) -> None:
    start = Settings.model_validate({"partitions": {"start": written}}).partitions.start
    assert start == expected and start.tzinfo is not None


@pytest.mark.parametrize("master", ["local", "local[4]", "local[*]", "local[2,3]", "spark://host:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://k:443"])
def test_spark_master_forms(master: str) -> None:
    assert Settings.model_validate({"spark": {"master": master}}).spark.master == master


@pytest.mark.parametrize("master", ["foo://", "local[0]", "local[x]", "spark://host", "", "YARN "])
def test_spark_master_rejected(master: str) -> None:
    error = load_error(env={"EPOCHAL__SPARK__MASTER": master})
    assert error.key == "spark.master" and "must look like local" in str(error)


# --------------------------------------------------------------------------- dump, schema, example, docs


def test_dump_round_trips(tmp_path: Path) -> None:
    settings = load_settings(
        env={
            "EPOCHAL__LANDING": "/data/in",
            "EPOCHAL__OPTIONS__SESSION_GAP": "1h30m",
            "EPOCHAL__SPARK__CONF": "{spark.ui.port: 4050}",
            "EPOCHAL__PARTITIONS__START": "2026-12-01T07:00:00Z",
        }
    )
    text = dump_settings(settings)
    assert "session_gap: 1h30m" in text
    assert load_settings(write(tmp_path / "dump.yaml", text), env={}) == settings


def test_json_schema_names_every_section() -> None:
    schema = settings_json_schema()
    assert set(schema["properties"]) == set(Settings.model_fields)
    assert schema["additionalProperties"] is False


def test_example_file_loads_with_every_key_at_its_default() -> None:
    settings = load_settings(EXAMPLE, env={})
    assert settings == Settings().resolve_paths(EXAMPLE.parent)
    assert set(leaf_keys(yaml.safe_load(EXAMPLE.read_text()))) == {key for key, _ in iter_fields()}


def leaf_keys(data: dict[str, object]) -> list[str]:
    """Dotted keys written in a config mapping: section keys expanded, mapping values (spark.conf) not."""
    sections = {name for name, info in Settings.model_fields.items() if section_model(info.annotation)}
    keys = []
    for key, value in data.items():
        if key in sections and isinstance(value, dict):
            keys.extend(f"{key}.{sub}" for sub in value)
        else:
            keys.append(key)
    return keys


def test_every_field_has_a_description() -> None:
    assert all(info.description for _, info in iter_fields())


def test_configuration_reference_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render_configuration_markdown(), "run: python -m epochal.config.docs > docs/configuration.md"


def test_reference_lists_every_key_with_its_env_var() -> None:
    text = render_configuration_markdown()
    for key, _ in iter_fields():
        assert f"| `{key}` |" in text and f"`{env_var_name(key)}`" in text


@pytest.mark.parametrize(
    "key", ["spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key", "spark.hadoop.fs.s3a.session.token"]
)
def test_credentials_in_spark_conf_are_refused_without_echoing_them(tmp_path: Path, key: str) -> None:
    path = write(tmp_path / "epochal.yaml", f"spark:\n  conf:\n    {key}: hunter2-do-not-print\n")
    error = load_error(path)
    assert f"{key!r} holds a credential" in str(error) and "AWS_SECRET_ACCESS_KEY" in str(error)
    assert "hunter2" not in str(error)


def test_an_entry_of_spark_conf_set_by_its_variable_is_blamed_on_the_variable_not_the_file(tmp_path: Path) -> None:
    """EPOCHAL__SPARK__CONF__<property> sets one entry: an error in spark.conf names that variable, not a line of
    a file that has no conf (and says the file may hold entries too when it has a conf of its own)."""
    variable = "EPOCHAL__SPARK__CONF__spark.hadoop.fs.s3a.access.key"
    bare = write(tmp_path / "bare.yaml", "spark: {master: 'local[1]', parallelism: 2}\n")
    error = str(load_error(bare, env={variable: "AKIA-do-not-print"}))
    assert error.startswith(f"config error in {variable}:") and "AKIA" not in error
    with_conf = write(tmp_path / "conf.yaml", "spark:\n  conf:\n    spark.ui.port: '4050'\n")
    assert f"config error in {variable} (or {with_conf})" in str(load_error(with_conf, env={variable: "AKIA-x"}))


def test_a_credentials_provider_class_is_not_a_credential(tmp_path: Path) -> None:
    provider = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    path = write(tmp_path / "epochal.yaml", f"spark:\n  conf:\n    spark.hadoop.fs.s3a.aws.credentials.provider: {provider}\n")
    assert load_settings(path).spark.conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == provider
