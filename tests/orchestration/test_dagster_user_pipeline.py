"""The Dagster definitions of a user's own pipeline, named by its import path (``pipeline: acme.totals:build``),
in a package outside the repository: its epoch job runs the partitions, and the restore job brings the state
and the upsert sink (whose stage has no ``view()``) back to a checkpoint, with a new parallelism kept after it;
then a backfill of the whole range in one run replays it to the same sink."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from epochal.config import load_settings
from epochal.orchestration.definitions import build_definitions
from epochal.pipeline.progress import ProgressStore
from epochal.state.checkpoint.storage import CheckpointStorage
from tests.support.user_package import EPOCHS, ROWS_MODULE, TOTALS_MODULE, on_import_path, write_landing

KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    with on_import_path(tmp_path / "site", "acme", {"rows": ROWS_MODULE, "totals": TOTALS_MODULE}, monkeypatch):
        write_landing(tmp_path, EPOCHS)
        (tmp_path / "epochal.yaml").write_text(yaml.safe_dump({
            "pipeline": "acme.totals:build", "landing": "landing",
            "partitions": {"start": "2026-11-01T00:00:00Z"},
            "spark": {"master": "local[2]", "parallelism": 2, "shuffle_partitions": 2, "max_parallelism": 16},
            "checkpoints": {"interval_epochs": 1, "retain": 3},
        }))
        yield tmp_path


def _sink(spark, project: Path) -> dict[str, int]:
    return {r.key: r.total for r in spark.read.format("delta").load(str(project / "data" / "warehouse" / "totals")).collect()}


@pytest.mark.slow
def test_the_user_pipelines_jobs_run_epochs_and_restore_with_a_new_parallelism(spark, project):
    config = project / "epochal.yaml"
    defs = build_definitions(load_settings(config), str(config))
    with dg.instance_for_test() as instance:  # resolving jobs needs an instance (Dagster's defs state storage)
        assert {job.name for job in defs.resolve_all_job_defs()} >= {"totals_epochs", "restore", "savepoint"}
        for key in KEYS:
            assert defs.resolve_job_def("totals_epochs").execute_in_process(partition_key=key, instance=instance).success
        assert _sink(spark, project) == {"a": 111, "b": 7}

        restored = defs.resolve_job_def("restore").execute_in_process(
            instance=instance, run_config={"ops": {"restore_state": {"config": {"checkpoint": 2, "parallelism": 3}}}})
        assert restored.success
    assert _sink(spark, project) == {"a": 11, "b": 2}  # checkpoint 2 is epoch 1: the sink's recorded version
    progress = ProgressStore(CheckpointStorage(load_settings(config).checkpoints.dir)).load()
    assert (progress.last_done_epoch, progress.parallelism) == (1, 3)

    # A backfill of the whole range as Dagster's single-run policy launches it: one run, from empty state.
    with dg.instance_for_test() as instance:
        tags = {"dagster/backfill": "bf", "dagster/asset_partition_range_start": KEYS[0],
                "dagster/asset_partition_range_end": KEYS[-1]}
        backfill = defs.resolve_job_def("totals_epochs").execute_in_process(instance=instance, tags=tags)
        assert backfill.success
        records = instance.fetch_materializations(dg.AssetKey("checkpoint"), limit=10).records
        assert sorted(r.asset_materialization.partition for r in records) == KEYS, "each partition reported on its own"
    assert _sink(spark, project) == {"a": 111, "b": 7}


def test_a_file_without_max_parallelism_builds_the_pipeline_through_the_resources_as_it_does_directly(project):
    """Dagster's Spark resource passes every setting (the default max parallelism too): a file that leaves it to
    the pipeline (16 here) is not refused on the way through the resources."""
    from epochal.orchestration.resources import EpochalResource
    from epochal.pipeline.registry import build_pipeline

    config = project / "epochal.yaml"
    doc = yaml.safe_load(config.read_text())
    del doc["spark"]["max_parallelism"]
    config.write_text(yaml.safe_dump(doc))
    direct = load_settings(config)
    through = EpochalResource.from_settings(direct, str(config)).settings()
    assert build_pipeline(direct).max_parallelism == build_pipeline(through).max_parallelism == 16
