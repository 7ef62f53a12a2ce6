"""Pipelines by name (``settings.pipeline``) and the deployment built from settings."""

from __future__ import annotations

from typing import Callable

from epochal.config import Settings
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.errors import PipelineDefinitionError


def _clickstream(settings: Settings) -> Pipeline:
    from epochal.pipeline.examples.clickstream.pipeline import build_pipeline

    return build_pipeline(settings)


PIPELINES: dict[str, Callable[[Settings], Pipeline]] = {"clickstream": _clickstream}


def build_pipeline(settings: Settings) -> Pipeline:
    try:
        factory = PIPELINES[settings.pipeline]
    except KeyError:
        raise PipelineDefinitionError(
            f"unknown pipeline {settings.pipeline!r} (config key 'pipeline'); known: {sorted(PIPELINES)}"
        ) from None
    return factory(settings)


def build_deployment(settings: Settings, spark=None, *, clock=None):
    """The pipeline, one SparkSession for the process, and everything around them."""
    from epochal.pipeline.deployment import Deployment
    from epochal.state.session import build_spark_session

    pipeline = build_pipeline(settings)
    spark = spark or build_spark_session(settings.spark, locations=settings.storage_locations())
    return Deployment(settings, spark, pipeline, clock=clock)
