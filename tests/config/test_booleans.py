"""Boolean keys take only true/false (YAML 1.2): pydantic's lax parsing read ``yes``, ``on``, ``1``, ``off``, ``no``
as booleans, though the reference (docs/configuration.md, "YAML") says they stay strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.config import ConfigError, load_settings

KEYS = ["spark.ui_enabled", "dagster.schedule_enabled"]


def _yaml(key: str, value: str) -> str:
    section, name = key.split(".")
    return f"{section}:\n  {name}: {value}\n"


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["yes", "no", "on", "off", "y", "1", "0", "'true'"])
def test_a_boolean_key_in_the_file_is_true_or_false_only(tmp_path: Path, key: str, value: str) -> None:
    path = tmp_path / "epochal.yaml"
    path.write_text(_yaml(key, value))
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    first = str(caught.value).splitlines()[0]
    assert f"{key} = " in first and first.endswith("must be true or false"), first


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False), ("True", True), ("FALSE", False)])
def test_true_and_false_still_load(tmp_path: Path, key: str, value: str, expected: bool) -> None:
    path = tmp_path / "epochal.yaml"
    path.write_text(_yaml(key, value))
    section, name = key.split(".")
    assert getattr(getattr(load_settings(path, env={}), section), name) is expected
    variable = f"EPOCHAL__{section.upper()}__{name.upper()}"
    assert getattr(getattr(load_settings(env={variable: value}), section), name) is expected


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["yes", "on", "off", "no", "1", "0", "maybe"])
def test_a_boolean_environment_variable_is_true_or_false_only(key: str, value: str) -> None:
    section, name = key.split(".")
    variable = f"EPOCHAL__{section.upper()}__{name.upper()}"
    with pytest.raises(ConfigError) as caught:
        load_settings(env={variable: value})
    first = str(caught.value).splitlines()[0]
    assert variable in first and f"{key} = " in first and first.endswith("must be true or false"), first
