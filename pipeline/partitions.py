"""Time-window partitions (Dagster's keys) and epoch numbering.

Epoch ``e`` is the ``e``-th window from ``partitions.start``: hourly keys look
like ``2026-11-01-13:00`` and daily keys like ``2026-11-01``, as Dagster's
``HourlyPartitionsDefinition`` / ``DailyPartitionsDefinition`` name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from epochal.config import Granularity, PartitionSettings
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.stage import EpochInfo

FORMATS = {Granularity.HOURLY: "%Y-%m-%d-%H:%M", Granularity.DAILY: "%Y-%m-%d"}
WIDTHS = {Granularity.HOURLY: timedelta(hours=1), Granularity.DAILY: timedelta(days=1)}


class PartitionKeyError(PipelineError, ValueError):
    """A partition key that is malformed or outside the partitions."""


@dataclass(frozen=True)
class Partitioning:
    start: datetime
    granularity: Granularity

    @classmethod
    def from_settings(cls, settings: PartitionSettings) -> Partitioning:
        return cls(settings.start.astimezone(timezone.utc), settings.granularity)

    def record(self) -> dict[str, str]:
        """What numbers the epochs, as ``progress.json`` records it (see ``Deployment.check_partitions``)."""
        return {"start": self.start.isoformat(), "granularity": self.granularity.value}

    @property
    def fmt(self) -> str:
        return FORMATS[self.granularity]

    @property
    def width(self) -> timedelta:
        return WIDTHS[self.granularity]

    def key(self, epoch: int) -> str:
        if epoch < 0:
            raise PartitionKeyError(f"epoch {epoch} is before partitions.start")
        return (self.start + epoch * self.width).strftime(self.fmt)

    def epoch(self, key: str) -> int:
        try:
            start = datetime.strptime(key, self.fmt).replace(tzinfo=timezone.utc)
            if start.strftime(self.fmt) != key:  # strptime takes "0:00" for "00:00": not a key Dagster knows
                raise ValueError(key)
        except ValueError:
            example = self.start.strftime(self.fmt)
            raise PartitionKeyError(f"bad partition key {key!r}: expected the form {example!r} ({self.granularity.value})") from None
        offset = start - self.start
        if offset < timedelta(0):
            raise PartitionKeyError(f"partition {key!r} is before partitions.start {self.key(0)!r}")
        if offset % self.width:
            raise PartitionKeyError(f"partition {key!r} is not aligned to {self.granularity.value} windows")
        return int(offset / self.width)

    def info(self, epoch: int) -> EpochInfo:
        start = self.start + epoch * self.width
        return EpochInfo(epoch=epoch, partition=self.key(epoch), window_start=start, window_end=start + self.width)

    def latest_closed_epoch(self, now: datetime) -> int | None:
        """The newest window that has ended at ``now`` (None before the first one ends)."""
        elapsed = now.astimezone(timezone.utc) - self.start
        closed = int(elapsed / self.width) - 1
        return closed if closed >= 0 else None
