"""Sources that fix their input range for an epoch before reading (replayable input).

A source ``plan``s an epoch: it lists exactly what the epoch will read and the
runner records that plan durably before anything is read, so that a replay of
the epoch (after a crash or a restore) reads the same input even if more files
have landed since. A backfill re-plans on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from epochal.pipeline.stage import EpochInfo


@dataclass(frozen=True)
class SourceBatch:
    """What a source hands to the stages for one epoch: its planned input."""

    name: str
    partition: str
    files: tuple[str, ...]
    position: dict[str, Any] = field(default_factory=dict)


class Source(Protocol):
    name: str

    def plan(self, info: EpochInfo) -> SourceBatch:
        """Fix the epoch's input range (called once, before reading; the runner records it)."""
        ...


@dataclass(frozen=True)
class HourlyFolderSource:
    """Files under ``<landing>/dt=YYYY-MM-DD/hour=HH/*.jsonl`` of the epoch's window."""

    name: str
    landing: str

    def plan(self, info: EpochInfo) -> SourceBatch:
        from epochal.pipeline.examples.clickstream.layout import partition_files

        files = tuple(partition_files(self.landing, info.partition))
        return SourceBatch(
            name=self.name,
            partition=info.partition,
            files=files,
            position={"partition": info.partition, "epoch": info.epoch, "files": list(files)},
        )


def batch_from_position(name: str, position: dict[str, Any]) -> SourceBatch:
    """Rebuild a recorded plan."""
    return SourceBatch(name=name, partition=position["partition"], files=tuple(position.get("files", [])), position=position)


def source_names(sources: Sequence[Source]) -> list[str]:
    return [s.name for s in sources]
