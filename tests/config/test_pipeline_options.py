"""A pipeline's own ``options``: validated by the pipeline's model, errors naming options.<key> and where it was set."""

from __future__ import annotations

from pathlib import Path

import pytest

from epochal.config import ConfigError, load_settings
from tests.config.test_config import write


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("options:\n  session_gap: soon\n", "options.session_gap = 'soon': must be a duration: 30m"),
        ("options:\n  session_gap: 0s\n", "options.session_gap = '0s': must be a positive duration"),
        ("options:\n  allowed_lateness: -5\n", "options.allowed_lateness = -5: must not be negative"),
        ("options:\n  sesion_gap: 45m\n", "options.sesion_gap"),
    ],
)
def test_bad_pipeline_options_are_named_by_the_pipeline_before_any_work(tmp_path: Path, yaml_text: str, expected: str) -> None:
    """The pipeline validates its own options (its pydantic model): a ConfigError naming options.<key> and the file."""
    from epochal.pipeline.registry import build_pipeline

    path = write(tmp_path / "epochal.yaml", yaml_text)
    settings = load_settings(path, env={})
    with pytest.raises(ConfigError) as caught:
        build_pipeline(settings)
    first_line = str(caught.value).splitlines()[0]
    assert first_line.startswith(f"config error in {path}, line 2: ")  # the option's own line, as for other keys
    assert expected in first_line and "an option of pipeline 'clickstream'" in first_line
    assert caught.value.key == expected.split(" ")[0]


def test_a_bad_pipeline_option_from_the_environment_names_the_variable(tmp_path: Path, monkeypatch) -> None:
    """Found from outside: the error named the configuration file, which does not hold the value."""
    from epochal.pipeline.registry import build_pipeline

    path = write(tmp_path / "epochal.yaml", "options:\n  session_gap: 45m\n")
    monkeypatch.setenv("EPOCHAL__OPTIONS__ALLOWED_LATENESS", "soon")
    with pytest.raises(ConfigError) as caught:
        build_pipeline(load_settings(path))
    assert str(caught.value).startswith(
        "config error in EPOCHAL__OPTIONS__ALLOWED_LATENESS: options.allowed_lateness = 'soon': must be a duration")
