"""Clocks injected into the engine: the engine itself never reads the wall clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

DEFAULT_START = datetime(2026, 11, 1, tzinfo=timezone.utc)


@runtime_checkable
class Clock(Protocol):
    """A source of timezone-aware UTC instants."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock; the one production implementation, injected at the edge."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that moves only when told to (tests, replays)."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds`` (>= 0) and return the new instant."""
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self._now = self._now + timedelta(seconds=seconds)
        return self._now


def seconds_between(start: datetime, end: datetime) -> float:
    """Elapsed seconds from ``start`` to ``end``."""
    return (end - start).total_seconds()
