"""The stateful stages of the clickstream example (DESIGN.md section 5), as :class:`~pipeline.stage.Stage` objects.

``parse -> dedupe -> {aggregate_users, aggregate_hours, sessionize}``; the rules
they follow are the ones documented in :mod:`reference` (the test oracle).

Everything is set-oriented Spark (JVM) code: a stage reads its state as a
DataFrame, joins it to the epoch's batch, writes the keys that changed (one
``MERGE`` per state) and returns its outputs. State never goes to the driver.

Two rules every stage here keeps:

- **Pinned reads.** A stage's outputs are lazy and are consumed after the stage
  has written its state (by later stages and by the sinks). Every state read
  is pinned to the Delta version the epoch started from, so that recomputing
  an output gives the same rows however late it happens.
- **Held frames.** A frame used both for a state write and for an output is
  persisted once and *held* by the stage until its next ``process`` call (or
  until the runner calls :meth:`release`), so the epoch computes it once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Mapping, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.pipeline.examples.clickstream.parse import QUARANTINE_SCHEMA, dedupe_within_batch, parse_landing
from epochal.pipeline.examples.clickstream.transforms import (
    hourly_revenue_delta,
    merge_hourly_revenue,
    merge_user_totals,
    user_totals_delta,
)
from epochal.pipeline.sources import SourceBatch
from epochal.pipeline.stage import StageContext
from epochal.state.descriptors import (
    KeyedStateDescriptor,
    OperatorStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)

# ----------------------------------------------------------------------------- names and schemas

SOURCE = "landing"
PARSE, DEDUPE, USERS, HOURS, SESSIONIZE = "parse", "dedupe", "aggregate_users", "aggregate_hours", "sessionize"


def _schema(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, dtype, True) for name, dtype in fields])


_TS, _LONG, _DOUBLE, _STR = T.TimestampType(), T.LongType(), T.DoubleType(), T.StringType()

USER_TOTALS_SCHEMA = _schema(
    ("user_id", _STR), ("events", _LONG), ("purchases", _LONG), ("revenue", _DOUBLE),
    ("first_event_time", _TS), ("last_event_time", _TS),
)
HOURLY_REVENUE_SCHEMA = _schema(("hour", _TS), ("purchases", _LONG), ("revenue", _DOUBLE))
SESSIONS_SCHEMA = _schema(
    ("user_id", _STR), ("session_start", _TS), ("session_end", _TS), ("events", _LONG), ("revenue", _DOUBLE)
)
LATE_EVENTS_SCHEMA = _schema(
    ("event_id", _STR), ("user_id", _STR), ("event_type", _STR), ("amount", _DOUBLE), ("event_time", _TS),
    ("partition", _STR),
)
QUARANTINE_SINK_SCHEMA = QUARANTINE_SCHEMA  # partition, file, raw, reason

#: The value of ``aggregate_users``' state: the user's totals so far.
USER_TOTALS_VALUE = T.StructType(USER_TOTALS_SCHEMA.fields[1:])
#: The value of ``aggregate_hours``' state (keyed by the hour's start).
HOURLY_VALUE = T.StructType(HOURLY_REVENUE_SCHEMA.fields[1:])
#: One session of a user: first and last event time, distinct events, revenue.
SESSION = _schema(("start", _TS), ("end", _TS), ("events", _LONG), ("revenue", _DOUBLE))


def _micros(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _instant(micros: int) -> datetime:
    """Microseconds since the epoch as an aware UTC datetime (exact: no float, no local time zone)."""
    return _EPOCH + timedelta(microseconds=micros)


# ----------------------------------------------------------------------------- shared helpers

@dataclass
class _Held:
    """Frames a stage persisted for one epoch, for speed only: a frame used twice in an epoch (to write
    state and as output) is computed once. Correctness needs no caching: state reads are pinned."""

    frames: list[DataFrame] = field(default_factory=list)

    def hold(self, df: DataFrame) -> DataFrame:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(df)
        return df

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()
        self.frames.clear()


class _HoldingStage:
    """Base of stages that cache frames for the epoch (released at the next ``process`` or by :meth:`release`)."""

    def __init__(self) -> None:
        self._held = _Held()

    def release(self) -> None:
        """Unpersist the frames of the last epoch (call once its sinks are written)."""
        self._held.release()


# ----------------------------------------------------------------------------- parse

class ParseStage(_HoldingStage):
    """``landing`` -> ``events``, ``quarantine``: :func:`parse.parse_landing` over the epoch's planned files.

    Stateless. The lines are parsed once per epoch: when both outputs are read
    (``ctx.is_read``), the classified lines are held (persisted) and both outputs
    are filters of them; when one is not (no quarantine sink, say), nothing is held
    and the one read is a filter of the parse itself (200k events: 0.9 s less).
    """

    inputs: Sequence[str] = (SOURCE,)
    outputs: Sequence[str] = ("events", "quarantine")
    keyed_state: Sequence[KeyedStateDescriptor] = ()
    operator_state: Sequence[OperatorStateDescriptor] = ()

    def __init__(self, name: str = PARSE, source: str = SOURCE) -> None:
        super().__init__()
        self.name = name
        self.inputs = (source,)

    def process(self, ctx: StageContext, inputs: Mapping[str, object]) -> dict[str, DataFrame]:
        self.release()
        batch = inputs[self.inputs[0]]
        if not isinstance(batch, SourceBatch):
            raise TypeError(f"stage {self.name!r} expects a SourceBatch as {self.inputs[0]!r}, got {type(batch).__name__}")
        both_read = all(ctx.is_read(output) for output in self.outputs)
        hold = self._held.hold if both_read else None
        parsed = parse_landing(ctx.spark, batch.files, batch.partition or ctx.partition, hold=hold)
        return {"events": parsed.events, "quarantine": parsed.quarantine}


# ----------------------------------------------------------------------------- dedupe

class DedupeStage(_HoldingStage):
    """``parse.events`` -> ``distinct``: one event per ``event_id`` across epochs.

    State ``seen`` (value state keyed by ``event_id``, TTL on the epoch clock,
    value = the clock the id was accepted at). An event is a duplicate while
    its id is live in ``seen`` (written at clock ``c``: live while
    ``now < c + ttl``). Only new ids are written (appended: the anti-join
    proved them absent, so the write does not read the state), so a duplicate
    never refreshes the TTL. ``distinct`` is held for the epoch.
    """

    outputs: Sequence[str] = ("distinct",)
    operator_state: Sequence[OperatorStateDescriptor] = ()

    def __init__(self, ttl: timedelta, name: str = DEDUPE, input: str = f"{PARSE}.events") -> None:
        super().__init__()
        self.name = name
        self.inputs = (input,)
        self.seen = ValueStateDescriptor("seen", value_type=T.TimestampType(), ttl=StateTtlConfig(ttl))
        self.keyed_state = (self.seen,)

    def process(self, ctx: StageContext, inputs: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        self.release()
        batch = dedupe_within_batch(inputs[self.inputs[0]])
        seen = ctx.keyed.values(self.seen).select(F.col("key").alias("event_id"))
        distinct = self._held.hold(batch.join(seen, "event_id", "left_anti"))
        accepted = distinct.select(F.col("event_id").alias("key"), F.lit(ctx.info.clock).cast("timestamp").alias("value"))
        ctx.keyed.insert(self.seen, accepted)  # ids not live in ``seen`` (the anti-join): a blind append
        return {"distinct": distinct}


# ----------------------------------------------------------------------------- aggregates

class UserTotalsStage(_HoldingStage):
    """``dedupe.distinct`` -> ``user_totals``: the full rows of the users with a distinct event this epoch.

    State ``totals`` (value state keyed by ``user_id``, value
    :data:`USER_TOTALS_VALUE`). :meth:`view` gives every user's row.
    """

    outputs: Sequence[str] = ("user_totals",)
    operator_state: Sequence[OperatorStateDescriptor] = ()

    def __init__(self, name: str = USERS, input: str = f"{DEDUPE}.distinct") -> None:
        super().__init__()
        self.name = name
        self.inputs = (input,)
        self.totals = ValueStateDescriptor("totals", value_type=USER_TOTALS_VALUE)
        self.keyed_state = (self.totals,)

    def process(self, ctx: StageContext, inputs: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        self.release()
        delta = user_totals_delta(inputs[self.inputs[0]])
        current = _unpack(ctx.keyed.values(self.totals), "user_id").join(delta.select("user_id"), "user_id", "left_semi")
        changed = self._held.hold(_conform(merge_user_totals(current, delta), USER_TOTALS_SCHEMA))
        ctx.keyed.update(self.totals, _pack(changed, "user_id"))
        return {"user_totals": changed}

    def view(self, ctx: StageContext, output: str = "user_totals") -> DataFrame:
        _check_output(self, output)
        return _conform(_unpack(ctx.keyed.values(self.totals), "user_id"), USER_TOTALS_SCHEMA)


class HourlyRevenueStage(_HoldingStage):
    """``dedupe.distinct`` -> ``hourly_revenue``: the full rows of the UTC hours with a distinct event this epoch.

    State ``hourly`` (value state keyed by the hour's start, a timestamp; value
    :data:`HOURLY_VALUE`). :meth:`view` gives every hour's row.
    """

    outputs: Sequence[str] = ("hourly_revenue",)
    operator_state: Sequence[OperatorStateDescriptor] = ()

    def __init__(self, name: str = HOURS, input: str = f"{DEDUPE}.distinct") -> None:
        super().__init__()
        self.name = name
        self.inputs = (input,)
        self.hourly = ValueStateDescriptor("hourly", key_type=T.TimestampType(), value_type=HOURLY_VALUE)
        self.keyed_state = (self.hourly,)

    def process(self, ctx: StageContext, inputs: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        self.release()
        delta = hourly_revenue_delta(inputs[self.inputs[0]])
        current = _unpack(ctx.keyed.values(self.hourly), "hour").join(delta.select("hour"), "hour", "left_semi")
        changed = self._held.hold(_conform(merge_hourly_revenue(current, delta), HOURLY_REVENUE_SCHEMA))
        ctx.keyed.update(self.hourly, _pack(changed, "hour"))
        return {"hourly_revenue": changed}

    def view(self, ctx: StageContext, output: str = "hourly_revenue") -> DataFrame:
        _check_output(self, output)
        return _conform(_unpack(ctx.keyed.values(self.hourly), "hour"), HOURLY_REVENUE_SCHEMA)


def _unpack(state: DataFrame, key: str) -> DataFrame:
    """State rows (key, value struct) as sink rows (``key`` renamed, the struct's fields as columns)."""
    return state.select(F.col("key").alias(key), "value.*")


def _pack(rows: DataFrame, key: str) -> DataFrame:
    """Sink rows as state rows: ``key``, ``value`` (a struct of the other columns)."""
    return rows.select(F.col(key).alias("key"), F.struct(*[c for c in rows.columns if c != key]).alias("value"))


def _conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def _check_output(stage, output: str) -> None:
    if output not in stage.outputs:
        raise KeyError(f"stage {stage.name!r} has no output {output!r}; outputs: {list(stage.outputs)}")


# ----------------------------------------------------------------------------- sessions

_SESSIONS_TYPE = T.ArrayType(SESSION)


def merge_session_spans(spans: Column, gap: timedelta) -> Column:
    """Sessions (array of :data:`SESSION`) merged so that consecutive ones are more than ``gap`` apart.

    ``spans`` holds a user's open sessions and new events (an event is a
    session with start = end). Sorted by start, each span joins the current
    session when it starts at most ``gap`` after the session's end, so an
    event within the gap of two sessions bridges them. One JVM fold per user.
    """
    gap_micros = F.lit(_micros(gap))
    zero = F.struct(F.array().cast(_SESSIONS_TYPE).alias("done"), F.lit(None).cast(SESSION).alias("cur"))

    def step(acc: Column, span: Column) -> Column:
        cur = acc["cur"]
        joins = cur.isNotNull() & (F.unix_micros(span["start"]) - F.unix_micros(cur["end"]) <= gap_micros)
        merged = F.struct(
            cur["start"].alias("start"),
            F.greatest(cur["end"], span["end"]).alias("end"),
            (cur["events"] + span["events"]).alias("events"),
            (cur["revenue"] + span["revenue"]).alias("revenue"),
        )
        closed = F.when(cur.isNull(), acc["done"]).otherwise(F.concat(acc["done"], F.array(cur)))
        return F.when(joins, F.struct(acc["done"].alias("done"), merged.alias("cur"))).otherwise(
            F.struct(closed.alias("done"), span.alias("cur"))
        )

    def finish(acc: Column) -> Column:
        return F.when(acc["cur"].isNull(), acc["done"]).otherwise(F.concat(acc["done"], F.array(acc["cur"])))

    return F.aggregate(F.array_sort(spans), zero, step, finish).cast(_SESSIONS_TYPE)


class SessionStage(_HoldingStage):
    """``dedupe.distinct`` -> ``sessions``, ``late_events``: event-time sessions closed by the watermark.

    State: ``open_sessions`` (value state keyed by ``user_id``), the user's open sessions, an array of
    :data:`SESSION` sorted by start. The watermark is the largest event time of the distinct events so far
    minus ``allowed_lateness``, and that largest event time is the latest end among the open sessions: the
    session holding the newest event never closes (it would need ``end + gap < end - lateness``, and the gap
    is positive, the lateness not negative), so no operator state of its own keeps it.

    Per epoch, with ``W0`` the watermark at its start (none in the first epoch):

    1. a distinct event with ``event_time < W0`` is late: ``late_events``;
    2. the watermark advances: ``W1 = max(max_event_time, batch max) - lateness``;
    3. the users to look at are those with on-time events and those with an
       open session due at ``W1`` (``end + gap < W1``); their open sessions
       and new events are merged (:func:`merge_session_spans`), the sessions
       with ``end + gap < W1`` are emitted (``sessions``) and dropped, the rest
       stay (one write of the state).

    The due sessions are found in the open sessions themselves, read once an epoch for the merge
    anyway: the set-oriented form of Flink's per-key event-time timer at ``end + gap``. A separate
    :class:`~epochal.state.backends.timers.EventTimeTimers` state (the orders example has one) would
    be a second table written every epoch to say what the first already holds.
    """

    outputs: Sequence[str] = ("sessions", "late_events")

    def __init__(
        self, gap: timedelta, allowed_lateness: timedelta, name: str = SESSIONIZE, input: str = f"{DEDUPE}.distinct"
    ) -> None:
        super().__init__()
        self.name = name
        self.inputs = (input,)
        self.gap = gap
        self.allowed_lateness = allowed_lateness
        self.open_sessions = ValueStateDescriptor("open_sessions", value_type=_SESSIONS_TYPE)
        self.keyed_state = (self.open_sessions,)
        self.operator_state = ()

    def process(self, ctx: StageContext, inputs: Mapping[str, DataFrame]) -> dict[str, DataFrame]:
        self.release()
        distinct = inputs[self.inputs[0]]
        open_sessions = ctx.keyed.values(self.open_sessions)  # the epoch's start: the watermark's and the merge's
        before, after = self._advance_watermark(open_sessions, distinct)
        is_late = F.lit(False) if before is None else F.col("event_time") < F.lit(before)
        flagged = distinct.withColumn("__late", F.coalesce(is_late, F.lit(False)))
        late = flagged.where("__late").select(*LATE_EVENTS_SCHEMA.names)
        users = self._held.hold(self._close_sessions(open_sessions, flagged.where(~F.col("__late")), after))
        still_open = F.when(F.size("open") > 0, F.col("open"))  # none: the key is cleared
        ctx.keyed.update(self.open_sessions, users.select(F.col("user_id").alias("key"), still_open.alias("value")))
        return {"sessions": _emitted(users), "late_events": _conform(late, LATE_EVENTS_SCHEMA)}

    def _advance_watermark(
        self, open_sessions: DataFrame, distinct: DataFrame
    ) -> tuple[datetime | None, datetime | None]:
        """The watermark before and after this epoch's events (None before any event).

        The watermark is one number per epoch, as in Flink: it is computed once (one small job: the latest
        end among the open sessions at the epoch's start and the batch's newest event, in exact microseconds)
        and used as a literal, not joined in. Both maxima come from one aggregate over the union of the two
        sides: a cross join of two one-row aggregates took a job per broadcast side and ``first()`` a job per
        partition it tried. Like Flink's, the watermark is not state of its own: the open sessions, which the
        stage keeps anyway, give it back after any restore.
        """
        old_ends = open_sessions.select(
            F.lit(True).alias("old"), F.unix_micros(F.array_max(F.col("value.end"))).alias("micros"))
        both = old_ends.unionByName(
            distinct.select(F.lit(False).alias("old"), F.unix_micros("event_time").alias("micros")))
        row = both.agg(
            F.max(F.when(F.col("old"), F.col("micros"))).alias("old"),
            F.max(F.when(~F.col("old"), F.col("micros"))).alias("batch"),
        ).collect()[0]
        seen = [m for m in (row["old"], row["batch"]) if m is not None]
        newest = _instant(max(seen)) if seen else None
        before = None if row["old"] is None else _instant(row["old"]) - self.allowed_lateness
        return before, None if newest is None else newest - self.allowed_lateness

    def _close_sessions(self, open_sessions: DataFrame, on_time: DataFrame, watermark: datetime | None) -> DataFrame:
        """Per user with on-time events or a due session: ``user_id``, ``closed`` and ``open`` sessions."""
        new = on_time.groupBy("user_id").agg(F.collect_list(_event_span()).alias("new"))
        old = open_sessions.select(F.col("key").alias("user_id"), F.col("value").alias("old"))
        empty = F.array().cast(_SESSIONS_TYPE)
        merged = merge_session_spans(F.concat(F.coalesce("old", empty), F.coalesce("new", empty)), self.gap)
        # A session closes once end + gap < the watermark; before any watermark none does.
        limit = None if watermark is None else _micros(watermark - _EPOCH) - _micros(self.gap)

        def closes(session: Column) -> Column:
            return F.lit(False) if limit is None else F.unix_micros(session["end"]) < F.lit(limit)

        # Due: one of the user's open sessions closes (Flink's event-time timer at its end + gap).
        due = F.exists(F.coalesce("old", empty), closes)
        return (
            new.join(old, "user_id", "full_outer")
            .where(F.col("new").isNotNull() | due)
            .select("user_id", merged.alias("sessions"))
            .select(
                "user_id",
                F.filter("sessions", closes).alias("closed"),
                F.filter("sessions", lambda s: ~closes(s)).alias("open"),
            )
        )


def _event_span() -> Column:
    """An event as a one-event session (:data:`SESSION`): start = end = its time, revenue = its purchase amount."""
    purchase = F.col("event_type") == "purchase"
    return F.struct(
        F.col("event_time").alias("start"),
        F.col("event_time").alias("end"),
        F.lit(1).cast("long").alias("events"),
        F.coalesce(F.when(purchase, F.col("amount")), F.lit(0.0)).cast("double").alias("revenue"),
    )


def _emitted(users: DataFrame) -> DataFrame:
    """The ``sessions`` sink rows: every closed session of ``users``."""
    closed = users.select("user_id", F.explode("closed").alias("s"))
    return _conform(
        closed.select(
            "user_id",
            F.col("s.start").alias("session_start"),
            F.col("s.end").alias("session_end"),
            F.col("s.events").alias("events"),
            F.col("s.revenue").alias("revenue"),
        ),
        SESSIONS_SCHEMA,
    )
