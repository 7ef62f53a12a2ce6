"""``pipeline:`` names a built-in pipeline, an installed plug-in (entry points ``epochal.pipelines``)
or an import path ``package.module:factory``: a user's own package, loaded without editing epochal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from epochal.config import ConfigError, Settings
from epochal.pipeline.errors import PipelineDefinitionError
from epochal.pipeline.registry import build_pipeline
from tests.support.user_package import on_import_path

PACKAGE = '''
from pydantic import BaseModel, ConfigDict
from pyspark.sql import types as T

import epochal

ROWS = T.StructType([T.StructField("key", T.StringType()), T.StructField("total", T.LongType())])


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    factor: int = 1


class Totals:
    TOTAL = epochal.ValueStateDescriptor("total", value_type=T.LongType())
    name, inputs, outputs, keyed_state, operator_state = "sum", ("landing",), ("totals",), (TOTAL,), ()

    def process(self, ctx, inputs):
        raise NotImplementedError


def build(settings):
    options = settings.pipeline_options(Options)
    return epochal.Pipeline(
        name=f"totals_x{options.factor}",
        sources=[epochal.HourlyFolderSource("landing", settings.landing)],
        stages=[Totals()],
        sinks=[epochal.SinkSpec("totals", "sum.totals", epochal.SinkMode.UPSERT, ROWS, keys=("key",))],
    )


PIPELINE = build(__import__("epochal").Settings())
NOT_A_PIPELINE = 42


def wrong(settings):
    return "a string"
'''


@pytest.fixture()
def user_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package of the user's own, outside the repository, on sys.path (as PYTHONPATH would put it)."""
    with on_import_path(tmp_path / "site", "acme_pipelines", {"totals": PACKAGE}, monkeypatch):
        yield "acme_pipelines.totals"


def test_an_import_path_names_a_factory_called_with_the_settings(user_package):
    pipeline = build_pipeline(Settings(pipeline=f"{user_package}:build", options={"factor": 3}))
    assert pipeline.name == "totals_x3"
    assert [s.name for s in pipeline.stages] == ["sum"]


def test_an_import_path_may_name_a_pipeline_object(user_package):
    assert build_pipeline(Settings(pipeline=f"{user_package}:PIPELINE")).name == "totals_x1"


def test_the_pipelines_own_options_are_validated_by_it(user_package):
    with pytest.raises(ConfigError, match=r"options\.factr.*an option of pipeline"):
        build_pipeline(Settings(pipeline=f"{user_package}:build", options={"factr": 3}))


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("acme_pipelines.totls:build", "no module named 'acme_pipelines.totls'"),
        ("acme_nothing.totals:build", "no module named 'acme_nothing'"),
        ("acme_pipelines.totals:biuld", "module 'acme_pipelines.totals' has no attribute 'biuld'"),
        ("acme_pipelines.totals:NOT_A_PIPELINE", "names a int, not a Pipeline or a factory"),
        ("acme_pipelines.totals:wrong", "the factory returned str, not an epochal.Pipeline"),
        ("totalz", "unknown pipeline 'totalz' (config key 'pipeline'); known: ['clickstream'"),
    ],
)
def test_a_misspelled_pipeline_is_a_clear_error_naming_what_failed(user_package, ref, message):
    with pytest.raises(PipelineDefinitionError) as caught:
        build_pipeline(Settings(pipeline=ref))
    assert message in str(caught.value)


def test_the_example_is_registered_as_an_entry_point():
    """An installed package registers names the same way (pyproject: [project.entry-points."epochal.pipelines"])."""
    from importlib.metadata import entry_points

    (entry,) = entry_points(group="epochal.pipelines", name="clickstream")
    assert entry.load()(Settings()).name == "clickstream"


def test_a_pipeline_name_must_suit_dagster():
    from epochal import Pipeline

    with pytest.raises(PipelineDefinitionError, match="pipeline name 'my-totals'"):
        Pipeline(name="my-totals", sources=[], stages=[], sinks=[])


def test_a_misspelled_pipeline_from_the_environment_is_named_by_its_variable(user_package, tmp_path, monkeypatch):
    """``EPOCHAL__PIPELINE`` overrides the file's ``pipeline``: the error blamed the file (probe 17)."""
    from epochal.config import load_settings

    config = tmp_path / "epochal.yaml"
    config.write_text(f"pipeline: {user_package}:build\n")
    monkeypatch.setenv("EPOCHAL__PIPELINE", f"{user_package}:nope")
    with pytest.raises(PipelineDefinitionError) as caught:
        build_pipeline(load_settings(config))
    assert "(config key 'pipeline' in environment variable EPOCHAL__PIPELINE)" in str(caught.value)
    monkeypatch.delenv("EPOCHAL__PIPELINE")
    config.write_text(f"pipeline: {user_package}:nope\n")
    with pytest.raises(PipelineDefinitionError, match=re.escape(f"(config key 'pipeline' in {config})")):
        build_pipeline(load_settings(config))
