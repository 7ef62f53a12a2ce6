"""A pipeline's definition refused when it is built, naming what is wrong and where: a max parallelism the
configuration says otherwise than the code, timers listed in ``keyed_state``, a partition key not in Dagster's
form, an upsert key that is no column, a factory that raises. No Spark work runs (split from
test_user_mistakes.py, whose mistakes show inside an epoch).
"""

from __future__ import annotations

import re
import sys

import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.errors import PipelineDefinitionError
from epochal.state.backends.timers import EventTimeTimers
from tests.pipeline.test_user_mistakes import _config


def test_a_configured_max_parallelism_other_than_the_pipelines_is_refused_naming_both_and_the_file(
    tmp_path, monkeypatch, toy_registered
):
    """The pipeline's fixes the key groups; the file's was silently ignored (found by a probe, 2026-12-04)."""
    from epochal.pipeline.registry import build_pipeline

    path = _config(tmp_path, tmp_path / "landing")  # spark.max_parallelism 16, as the toy pipeline's
    assert build_pipeline(load_settings(path)).max_parallelism == 16
    doc = yaml.safe_load(path.read_text())
    del doc["spark"]["max_parallelism"]  # not set: the pipeline's, whatever the default says
    path.write_text(yaml.safe_dump(doc))
    assert build_pipeline(load_settings(path)).max_parallelism == 16
    doc["spark"]["max_parallelism"] = 64
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(PipelineDefinitionError) as refused:
        build_pipeline(load_settings(path))
    assert str(refused.value).startswith(f"spark.max_parallelism is 64 in {path}, but pipeline 'toy' is built with "
                                         "max_parallelism=16, which fixes its key groups"), str(refused.value)
    # set by the environment (which overrides the file): the variable is named, not the file (probe, 2026-12-05)
    doc["spark"]["max_parallelism"] = 16
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("EPOCHAL__SPARK__MAX_PARALLELISM", "32")
    with pytest.raises(PipelineDefinitionError) as refused:
        build_pipeline(load_settings(path))
    assert str(refused.value).startswith("spark.max_parallelism is 32 (environment variable "
                                         "EPOCHAL__SPARK__MAX_PARALLELISM), but pipeline 'toy'"), str(refused.value)


def test_timers_listed_in_keyed_state_stand_for_their_descriptor_and_anything_else_is_named():
    timers = EventTimeTimers.declare("timers")

    class Timed(toy.Sum):
        keyed_state = (toy.TOTAL, timers)

    stage = Timed()
    Pipeline(name="p", sources=[toy.HourlyFolderSource("landing", "/nowhere")], stages=[toy.Read(), stage], sinks=[])
    assert stage.keyed_state == (toy.TOTAL, timers.descriptor)

    class Wrong(toy.Sum):
        keyed_state = (toy.TOTAL, "total")

    with pytest.raises(PipelineDefinitionError, match=r"stage 'sum': keyed_state holds 'total', which is not a "
                                                      r"KeyedStateDescriptor"):
        Pipeline(name="p", sources=[toy.HourlyFolderSource("landing", "/x")], stages=[toy.Read(), Wrong()], sinks=[])


@pytest.mark.parametrize("key", ["2026-11-01-0:00", "2026-11-1-00:00", "2026-11-01-00:0", "2026-11-01-5", "2026-13-01-00:00"])
def test_a_partition_key_is_dagsters_form_exactly(key):
    from datetime import datetime, timezone

    from epochal.config import Granularity
    from epochal.pipeline.partitions import PartitionKeyError, Partitioning

    hourly = Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY)
    assert hourly.epoch("2026-11-01-05:00") == 5
    with pytest.raises(PartitionKeyError, match=rf"bad partition key '{key}': expected the form '2026-11-01-00:00' \(hourly\)"):
        hourly.epoch(key)


def test_an_upsert_key_that_is_not_a_column_of_the_sink_fails_when_the_pipeline_is_defined():
    """It failed at the sink's first MERGE, after the epoch's stages and state writes, with Spark's
    UNRESOLVED_COLUMN (found from outside, 2026-11-30)."""
    from pyspark.sql import types as T

    from epochal import SinkMode, SinkSpec

    schema = T.StructType([T.StructField("user", T.StringType()), T.StructField("total", T.LongType())])
    with pytest.raises(ValueError, match=re.escape("sink 'users': key(s) ['usr'] are not columns of its schema ['user', 'total']")):
        SinkSpec("users", "shop.users", SinkMode.UPSERT, schema, keys=("usr",))
    assert SinkSpec("users", "shop.users", SinkMode.UPSERT, schema, keys=("user",)).keys == ("user",)


def test_a_factory_that_raises_is_named_with_the_config_key(monkeypatch, tmp_path):
    """Found from outside: a factory raising its own error printed only that error ("factory exploded")."""
    import types

    from epochal.config import Settings
    from epochal.pipeline.registry import build_pipeline

    module = types.ModuleType("acme_boom")

    def build(settings):
        raise RuntimeError("factory exploded")

    module.build = build
    monkeypatch.setitem(sys.modules, "acme_boom", module)
    settings = Settings.model_validate({"pipeline": "acme_boom:build", "landing": str(tmp_path), "warehouse": str(tmp_path / "w"),
                                        "checkpoints": {"dir": str(tmp_path / "c")}})
    with pytest.raises(PipelineDefinitionError, match=r"^pipeline 'acme_boom:build' \(config key 'pipeline'\): its factory "
                                                      r"raised RuntimeError: factory exploded$"):
        build_pipeline(settings)
