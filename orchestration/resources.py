"""Dagster resources, built from the pydantic configuration (DESIGN section 6).

- :class:`SparkResource`: the run's one SparkSession (Delta configured), from the
  ``spark`` section. ``getOrCreate`` underneath: one JVM per run process.
- :class:`CheckpointStorageResource`: checkpoint storage (fsspec), from the
  ``checkpoints`` section. Schedules and sensors use only this one: they never
  start Spark.
- :class:`EpochalResource`: the deployment (the YAML file, with the two above
  taking precedence, so a launchpad override of a resource's config applies).
"""


from datetime import timezone
from typing import Dict, Optional

import dagster as dg

from epochal.config import CheckpointSettings, Settings, SparkSettings, load_settings
from epochal.state.checkpoint.failure import FailureState, StorageFailureStateRepository
from epochal.state.checkpoint.stats import CheckpointStats, JsonLinesStatsHistory
from epochal.state.checkpoint.storage import CheckpointStorage


class SparkResource(dg.ConfigurableResource):
    """The SparkSession of a run: Delta configured, one per process."""

    master: str = "local[*]"
    parallelism: int = 2
    max_parallelism: int = 128
    shuffle_partitions: Optional[int] = None
    ui_enabled: bool = False
    driver_memory: str = "2g"
    codegen_min_mb: float = SparkSettings.model_fields["codegen_min_mb"].default
    broadcast_join_min_mb: float = SparkSettings.model_fields["broadcast_join_min_mb"].default
    state_rewrite_below_mb: float = SparkSettings.model_fields["state_rewrite_below_mb"].default
    sink_rewrite_below_mb: float = SparkSettings.model_fields["sink_rewrite_below_mb"].default
    jit: str = SparkSettings.model_fields["jit"].default.value
    gc: str = SparkSettings.model_fields["gc"].default.value
    conf: Dict[str, str] = {}

    @classmethod
    def from_settings(cls, spark: SparkSettings) -> "SparkResource":
        return cls(**spark.model_dump(mode="json"))

    def settings(self) -> SparkSettings:
        return SparkSettings.model_validate(
            {name: getattr(self, name) for name in SparkSettings.model_fields}
        )

    def session(self, locations: tuple[str, ...] = (), *, short_run: bool = False):
        """The session; ``locations`` on S3 add the S3A connector (see ``epochal.state.delta.objectstore``);
        ``short_run``: a short run (``is_short_run``, for ``spark.jit: auto``)."""
        from epochal.state.session import build_spark_session

        return build_spark_session(self.settings(), locations=locations, short_run=short_run)


class CheckpointStorageResource(dg.ConfigurableResource):
    """Checkpoint storage (an fsspec URL): ``_metadata``, stats, failure state, requests."""

    dir: str
    savepoints_dir: Optional[str] = None

    @classmethod
    def from_settings(cls, checkpoints: CheckpointSettings) -> "CheckpointStorageResource":
        return cls(dir=str(checkpoints.dir), savepoints_dir=None if checkpoints.savepoints_dir is None else str(checkpoints.savepoints_dir))

    def storage(self) -> CheckpointStorage:
        return CheckpointStorage(self.dir, self.savepoints_dir)

    def failure_state(self) -> FailureState:
        """Whether the failure manager gave up (read from storage, no Spark)."""
        storage = self.storage()
        return StorageFailureStateRepository(storage).load()

    def stats(self) -> list[CheckpointStats]:
        """The checkpoint statistics history (completed and failed), oldest first."""
        return JsonLinesStatsHistory(self.storage()).load()

    def savepoint_requests(self) -> dict[str, str]:
        """The savepoint request files under ``<checkpoints>/requests/savepoint/``, each with when it was written
        (ISO 8601 UTC to the second; empty where the filesystem does not say): a file written anew is a new
        request."""
        storage = self.storage()
        folder = storage.child("requests", "savepoint")
        if not storage.exists(folder):
            return {}
        stamps = {}
        for name in sorted(storage.list_names(folder)):
            written = storage.modified_at(storage.child("requests", "savepoint", name))
            stamps[name] = "" if written is None else written.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        return stamps

    def savepoint_names(self) -> set[str]:
        """The savepoints' folder names."""
        storage = self.storage()
        return set(storage.list_savepoints()) if storage.exists(storage.savepoints_url) else set()


class EpochalResource(dg.ConfigurableResource):
    """One deployment: its YAML configuration, Spark and checkpoint storage."""

    config_path: Optional[str] = None
    spark: SparkResource
    checkpoints: CheckpointStorageResource

    @classmethod
    def from_settings(cls, settings: Settings, config_path: str | None = None) -> "EpochalResource":
        return cls(
            config_path=config_path,
            spark=SparkResource.from_settings(settings.spark),
            checkpoints=CheckpointStorageResource.from_settings(settings.checkpoints),
        )

    def settings(self) -> Settings:
        base = load_settings(self.config_path)
        checkpoints = base.checkpoints.model_copy(
            update={"dir": self.checkpoints.dir, "savepoints_dir": self.checkpoints.savepoints_dir}
        )
        return base.model_copy(update={"spark": self.spark.settings(), "checkpoints": checkpoints})

    def runner(self, *, lazy: bool = False):
        """An epoch runner on the run's SparkSession (built once per process; ``lazy``: on first use)."""
        from epochal.pipeline.registry import build_deployment
        from epochal.pipeline.runner import EpochRunner
        from epochal.state.session import LazySparkSession

        settings = self.settings()

        def start(short_run: bool = False):
            return self.spark.session(tuple(settings.storage_locations()), short_run=short_run)

        return EpochRunner(build_deployment(settings, LazySparkSession(start) if lazy else start()))
