"""epochal configuration: pydantic models loaded from one YAML file with environment overrides."""

from config.models import (  # noqa: F401
    CheckpointMode,
    CheckpointSettings,
    Granularity,
    PartitionSettings,
    Settings,
    SparkSettings,
)
