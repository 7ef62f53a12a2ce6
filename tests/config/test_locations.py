"""Folder settings that point at a file fail when the configuration loads, naming the key, not half-way
through a run with the operating system's bare "Not a directory"."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.config import ConfigError, load_settings


def test_a_file_where_a_folder_goes_fails_naming_the_key_and_line(tmp_path: Path) -> None:
    (tmp_path / "wh").write_text("")
    (tmp_path / "cp").write_text("")
    (tmp_path / "landing").mkdir()
    config = tmp_path / "epochal.yaml"
    config.write_text("landing: landing\nwarehouse: wh\ncheckpoints:\n  dir: file://" + str(tmp_path / "cp" / "x") + "\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    first, second = refused.value.issues
    assert (first.key, first.line, first.source) == ("warehouse", 2, str(config))
    assert first.message.startswith("is a file, not a folder")
    assert (second.key, second.line) == ("checkpoints.dir", 4)
    assert second.message.startswith(f"is under {tmp_path / 'cp'}, which is a file")


def test_folders_missing_or_present_and_urls_load(tmp_path: Path) -> None:
    (tmp_path / "landing").mkdir()
    config = tmp_path / "epochal.yaml"
    config.write_text("landing: landing\nwarehouse: not/yet/there\ncheckpoints:\n  dir: s3://bucket/cp\n")
    settings = load_settings(config, env={"EPOCHAL__DAGSTER__HOME": str(tmp_path / "dagster")})
    assert settings.warehouse == str(tmp_path / "not" / "yet" / "there")


def test_an_environment_variable_naming_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("")
    with pytest.raises(ConfigError, match=r"in EPOCHAL__DAGSTER__HOME: dagster.home = .*: is a file, not a folder"):
        load_settings(None, env={"EPOCHAL__DAGSTER__HOME": str(tmp_path / "home")})
