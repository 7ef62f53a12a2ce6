"""Event-time timers kept as keyed state (Flink's ``InternalTimerService``).

Their reads are the keyed backend's, pinned at the call: a lazy frame of the timers
stays the same after later writes to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.state.descriptors import ValueStateDescriptor
from epochal.state.backends.keyed import KeyedStateBackend


@dataclass(frozen=True)
class EventTimeTimers:
    """Event-time timers of a keyed stage (Flink's ``InternalTimerService``), kept as keyed state.

    One row per timer in a value state: ``key``, ``namespace`` = the timer's
    timestamp in epoch microseconds (text, so a key may hold several timers),
    ``value`` = the timestamp. As in Flink, a timer is *due* once the
    watermark reaches it (``timestamp <= watermark``); firing returns the due
    timers and removes them. Every operation is one set-oriented pass (at most
    one ``MERGE``); reads are pinned, so a returned frame stays valid after
    the timers change.
    """

    descriptor: ValueStateDescriptor

    @classmethod
    def declare(cls, name: str = "timers", key_type: T.DataType | None = None) -> EventTimeTimers:
        return cls(ValueStateDescriptor(name, key_type=key_type or T.StringType(), value_type=T.TimestampType()))

    def read(self, backend: KeyedStateBackend) -> DataFrame:
        """Every timer: ``key``, ``timestamp`` (pinned to the current version)."""
        return backend.read(self.descriptor).select("key", F.col("value").alias("timestamp"))

    def due(
        self, backend: KeyedStateBackend, watermark: DataFrame | datetime, *, current: DataFrame | None = None
    ) -> DataFrame:
        """Timers with ``timestamp <= watermark`` (``key``, ``timestamp``), left in place.

        ``watermark`` is a datetime or a one-row, one-column frame (null: nothing
        is due); ``current`` is a frame from :meth:`read` to reuse (else read now).
        """
        timers = self.read(backend) if current is None else current
        if isinstance(watermark, datetime):
            return timers.where(F.col("timestamp") <= F.lit(watermark).cast("timestamp"))
        mark = F.broadcast(watermark.select(F.col(watermark.columns[0]).cast("timestamp").alias("__watermark")))
        return timers.crossJoin(mark).where(F.col("timestamp") <= F.col("__watermark")).drop("__watermark")

    def fire(self, backend: KeyedStateBackend, watermark: DataFrame | datetime) -> DataFrame:
        """The due timers (``key``, ``timestamp``), removed from the state."""
        fired = self.due(backend, watermark)
        self.delete(backend, fired)
        return fired

    def register(self, backend: KeyedStateBackend, timers: DataFrame) -> None:
        """Add timers (columns ``key``, ``timestamp``); registering one twice keeps one."""
        backend.update(self.descriptor, self._rows(timers.dropDuplicates(["key", "timestamp"]), keep=True))

    def delete(self, backend: KeyedStateBackend, timers: DataFrame) -> None:
        """Remove timers (columns ``key``, ``timestamp``); unknown ones are ignored."""
        backend.update(self.descriptor, self._rows(timers.dropDuplicates(["key", "timestamp"]), keep=False))

    def replace(
        self, backend: KeyedStateBackend, keys: DataFrame, timers: DataFrame, *, current: DataFrame | None = None
    ) -> None:
        """Make the timers of ``keys`` (column ``key``) exactly ``timers`` (``key``, ``timestamp``): one MERGE.

        ``current`` is a frame from :meth:`read` to reuse (it must be the timers as they are now).
        """
        key_type = self.descriptor.key_type
        scope = keys.select(F.col("key").cast(key_type).alias("key")).distinct()
        existing = self.read(backend) if current is None else current
        old = self._rows(existing.join(scope, "key", "left_semi"), keep=True)
        new = self._rows(timers.dropDuplicates(["key", "timestamp"]), keep=True)
        joined = old.alias("o").join(new.alias("n"), ["key", "namespace"], "full_outer")
        backend.update(self.descriptor, joined.select("key", "namespace", F.col("n.value").alias("value")))

    def _rows(self, timers: DataFrame, *, keep: bool) -> DataFrame:
        ts = F.col("timestamp").cast("timestamp")
        value = ts if keep else F.lit(None).cast("timestamp")  # a null value clears the row
        return timers.select(
            F.col("key").cast(self.descriptor.key_type).alias("key"),
            F.unix_micros(ts).cast("string").alias("namespace"),
            value.alias("value"),
        )
