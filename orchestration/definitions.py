"""The Dagster definitions of a deployment (DESIGN section 4).

``dagster dev -m epochal.orchestration.definitions`` (or ``epochal ui``) loads ``defs``,
built from the YAML file named by ``EPOCHAL_CONFIG`` (defaults and ``EPOCHAL__*``
environment overrides when unset). Loading the definitions never starts Spark.
"""

from __future__ import annotations

import logging
import os

import dagster as dg

from epochal.config import Settings, load_settings
from epochal.orchestration.assets import DEPLOYMENT_TAG, build_epoch_assets, code_version, partitions_def, source_specs
from epochal.orchestration.automation import build_savepoint_sensor, build_schedule
from epochal.orchestration.jobs import build_jobs
from epochal.orchestration.resources import EpochalResource
from epochal.orchestration.ui import CONFIG_ENV, NO_CONFIG
from epochal.pipeline.registry import build_pipeline



def epoch_job_name(pipeline_name: str) -> str:
    """The epoch job of the pipeline called ``pipeline_name`` (``Pipeline.name``, not the import path)."""
    return f"{pipeline_name}_epochs"


def build_definitions(settings: Settings, config_path: str | None = None) -> dg.Definitions:
    pipeline = build_pipeline(settings)
    version = code_version(pipeline)
    epochs = build_epoch_assets(pipeline, settings)
    partitions = partitions_def(settings)
    epoch_job = dg.define_asset_job(
        epoch_job_name(pipeline.name), selection=dg.AssetSelection.assets(epochs), partitions_def=partitions,
        tags={DEPLOYMENT_TAG: pipeline.name}, executor_def=dg.in_process_executor,
        description="One epoch (one partition) of the pipeline: every stage, every sink, the checkpoint.",
    )
    restore_job, savepoint_job = build_jobs(pipeline.name)
    epochal = EpochalResource.from_settings(settings, config_path)
    return dg.Definitions(
        assets=[*source_specs(pipeline), epochs],
        jobs=[epoch_job, restore_job, savepoint_job],
        schedules=[build_schedule(settings, epoch_job, pipeline.name)],
        sensors=[build_savepoint_sensor(settings, savepoint_job, version, pipeline.name)],
        resources={"epochal": epochal, "checkpoints": epochal.checkpoints},
        executor=dg.in_process_executor,
    )


def load_definitions(config_path: str | None = None) -> dg.Definitions:
    path = config_path or os.environ.get(CONFIG_ENV) or None
    if path is not None:
        path = os.path.abspath(path)
    else:
        logging.getLogger("epochal").warning(NO_CONFIG)  # a user who forgot it would otherwise see the example
    return build_definitions(load_settings(path), path)


defs = load_definitions()
