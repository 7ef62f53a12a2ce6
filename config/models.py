"""Placeholder models; replaced by the full configuration (loader, validation) next."""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckpointMode(str, Enum):
    INCREMENTAL = "incremental"
    FULL = "full"


class Granularity(str, Enum):
    HOURLY = "hourly"
    DAILY = "daily"


class SparkSettings(_Strict):
    master: str = "local[*]"
    parallelism: int = Field(default=2, ge=1)
    max_parallelism: int = Field(default=128, ge=1, le=32768)
    shuffle_partitions: int | None = Field(default=None, ge=1)
    ui_enabled: bool = False
    driver_memory: str = "2g"
    conf: dict[str, str] = Field(default_factory=dict)


class CheckpointSettings(_Strict):
    dir: str = "data/checkpoints"
    retain: int = Field(default=3, ge=1)
    interval_epochs: int = Field(default=1, ge=1)
    timeout_s: float = Field(default=600, gt=0)
    tolerable_failures: int = Field(default=0, ge=0)
    mode: CheckpointMode = CheckpointMode.INCREMENTAL
    max_concurrent: int = Field(default=1, ge=1)
    min_pause_s: float = Field(default=0, ge=0)
    stats_history: int = Field(default=1000, ge=1)


class PartitionSettings(_Strict):
    start: datetime = datetime(2026, 11, 1, tzinfo=timezone.utc)
    granularity: Granularity = Granularity.HOURLY


class Settings(_Strict):
    pipeline: str = "clickstream"
    landing: str = "data/landing"
    warehouse: str = "data/warehouse"
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings)
    partitions: PartitionSettings = Field(default_factory=PartitionSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
