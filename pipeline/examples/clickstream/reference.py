"""An independent, pure-Python computation of every sink of the clickstream example.

This is the oracle the Spark pipeline is tested against. It shares no code
with the Spark side (only the reason-code names and the landing layout):
lines are parsed with :mod:`json` and :meth:`datetime.fromisoformat`, state
is plain dicts, sinks are built with pandas.

Decisions where DESIGN.md section 5 leaves room (the Spark pipeline must follow them):

Lines and parsing
  - Files of a partition: ``layout.partition_files`` (every ``*.jsonl`` of its
    hour folders, sorted). A file's lines are split like Hadoop's line reader:
    on ``\\n``, ``\\r\\n`` or ``\\r``; a UTF-8 BOM opening the file is skipped;
    no empty last line after a final terminator.
  - Blank = only ASCII whitespace (space, tab, LF, VT, FF, CR): ignored, never
    quarantined. Everything else is an event or one quarantine row.
  - Validation order and reason codes: see :mod:`reasons`. JSON ``null`` counts
    as missing. Strict JSON: no ``NaN``/``Infinity`` literals, nothing after
    the value; a number literal longer than 1000 characters is not JSON (Jackson's
    limit; nesting deeper than about 1000 is not JSON either, Python's recursion
    limit and Jackson's depth limit are close but not equal). Unknown fields are
    ignored (names match case-sensitively); one of the five fields named twice at
    the top level is ``duplicate_field:<f>``. An escaped unpaired surrogate in a
    string (``"\\ud800"``) becomes ``?``, as in Spark's UTF-8 strings.
  - ``event_time``: ``YYYY-MM-DDTHH:MM:SS[.1-9 digits](Z|+HH:MM|-HH:MM)``, offset
    at most 18:00, digits past microseconds truncated, a real date and time
    whose UTC instant lies in years 0001..9999. The same shape without an
    offset is ``timestamp_without_offset``; anything else is ``bad_timestamp``.
  - ``amount``: only for purchases: a finite JSON number >= 0 (``-0`` passes);
    for views and carts it is ignored whatever it holds and is null in events.
  - ``raw`` is the line's text; for a line that is not valid UTF-8 it is its
    bytes read as ISO-8859-1 (lossless: ``raw.encode("latin-1")`` gives them back;
    U+FFFD replacement is not used because Java and Python differ in how many
    replacement characters a bad sequence gets).

Dedupe (keyed state on ``event_id`` with TTL ``dedupe_ttl``, default 7 days)
  - The epoch clock is the partition window end (``2026-11-01-13:00`` -> 14:00Z).
  - Within an epoch, one event per ``event_id`` is kept: the smallest by
    (source_file, event_time, user_id, event_type, amount with null first).
  - It is a duplicate if the id was accepted at clock ``t`` with
    ``clock - t < dedupe_ttl`` (Flink's TTL: an entry written at ``t`` is live
    while ``clock < t + ttl``); otherwise (never seen, or seen the TTL or more
    ago) it is distinct again and the state becomes ``clock``. A duplicate
    does not refresh the TTL (Flink's OnCreateAndWrite).

Aggregates (over distinct events, late ones included)
  - ``user_totals``: one row per user with a distinct event: ``events``,
    ``purchases``, ``revenue`` (sum of purchase amounts, 0.0 if none),
    ``first_event_time``, ``last_event_time``.
  - ``hourly_revenue``: one row per UTC hour holding at least one distinct
    event (of any type): ``hour`` (the hour's start), ``purchases``, ``revenue``
    (0.0 if no purchase). Revenues here are exact sums (``math.fsum``);
    compare Spark's double sums with a relative tolerance (1e-9).

Sessions and lateness
  - Watermark ``W``: none before the first distinct event; at the end of each
    epoch ``W = max(event_time of all distinct events so far) - allowed_lateness``
    (default 1 hour), never moving back (late events take part but, being
    older than ``W``, cannot move it; an epoch without distinct events leaves
    it where it was).
  - A distinct event is late iff ``event_time < W`` (strict) with ``W`` the
    watermark at the start of its epoch (so nothing is late in the first
    epoch). Late events go to ``late_events`` (the event's columns; its
    ``partition`` is the epoch), count in the aggregates, never in sessions.
  - Other distinct events join their user's open sessions: events whose
    consecutive times differ by at most ``session_gap`` (30 minutes) form one
    session (a gap of exactly 30 minutes does not split); an event can bridge
    and merge two open sessions. A late event never extends or merges sessions.
  - At the end of each epoch, after the watermark advanced, every open session
    with ``session_end + session_gap < W`` (strict) is emitted once and
    forgotten: ``user_id``, ``session_start``, ``session_end`` (first and last
    event time), ``events`` (its distinct events, any type), ``revenue`` (sum of
    its purchase amounts, 0.0 if none). No later on-time event can reach an
    emitted session (its time is >= W). Sessions still open after the last
    epoch are not emitted (no end-of-input flush).

Epochs
  - ``expected_sinks`` runs the given partitions in the given order, which must
    be increasing; a partition left out is simply not processed (its files are
    never read). ``ReferencePipeline.run_epoch`` exposes the per-epoch outputs
    (parsed lines, distinct, late, emitted sessions, watermark before/after).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from epochal.pipeline.examples.clickstream.layout import epoch_clock

DEFAULT_DEDUPE_TTL = timedelta(days=7)
DEFAULT_SESSION_GAP = timedelta(minutes=30)
DEFAULT_ALLOWED_LATENESS = timedelta(hours=1)


from epochal.pipeline.examples.clickstream.reference_parse import (  # noqa: F401 - the reference's public names
    MAX_NUMBER_LENGTH,
    ParsedEvent,
    Rejected,
    Event,
    Quarantined,
    _utf8_string,
    parse_time,
    parse_line,
    split_lines,
    ParsedFiles,
    parse_files,
    read_partition,
)


# ----------------------------------------------------------------------------- dedupe

def _event_order(e: Event) -> tuple:
    return (e.source_file, e.event_time, e.user_id, e.event_type, e.amount is not None, e.amount or 0.0)


def dedupe_within_batch(events: Iterable[Event]) -> list[Event]:
    """One event per ``event_id``: the smallest by (source_file, event_time, user_id, event_type, amount nulls first)."""
    kept: dict[str, Event] = {}
    for e in sorted(events, key=_event_order):
        kept.setdefault(e.event_id, e)
    return sorted(kept.values(), key=_event_order)


# ----------------------------------------------------------------------------- sessions

@dataclass
class Session:
    """An open or emitted session of one user."""

    user_id: str
    start: datetime
    end: datetime
    amounts: list[float] = field(default_factory=list)
    events: int = 0

    def absorb(self, other: Session) -> None:
        """Merge ``other`` (which starts within the gap of this one's end) into this one."""
        self.end = max(self.end, other.end)
        self.events += other.events
        self.amounts += other.amounts


def merge_sessions(sessions: list[Session], gap: timedelta) -> list[Session]:
    """Merge sessions of one user whose spans are at most ``gap`` apart."""
    merged: list[Session] = []
    for s in sorted(sessions, key=lambda s: (s.start, s.end)):
        if merged and s.start - merged[-1].end <= gap:
            merged[-1].absorb(s)
        else:
            merged.append(Session(s.user_id, s.start, s.end, list(s.amounts), s.events))
    return merged


def _point_session(e: Event) -> Session:
    return Session(e.user_id, e.event_time, e.event_time, [e.amount] if e.amount is not None else [], 1)


# ----------------------------------------------------------------------------- the pipeline

@dataclass
class EpochResult:
    """What one epoch produced."""

    partition: str
    parsed: ParsedFiles
    distinct: list[Event]
    late: list[Event]
    emitted: list[Session]
    watermark_before: datetime | None
    watermark_after: datetime | None


@dataclass
class ReferencePipeline:
    """The clickstream pipeline, one epoch at a time, with its state in plain Python."""

    dedupe_ttl: timedelta = DEFAULT_DEDUPE_TTL
    session_gap: timedelta = DEFAULT_SESSION_GAP
    allowed_lateness: timedelta = DEFAULT_ALLOWED_LATENESS
    seen: dict[str, datetime] = field(default_factory=dict)  # event_id -> epoch clock when accepted
    open_sessions: dict[str, list[Session]] = field(default_factory=dict)
    max_event_time: datetime | None = None
    watermark: datetime | None = None
    last_partition: str | None = None
    history: list[EpochResult] = field(default_factory=list)

    def run_epoch(self, partition: str, files: Mapping[str, bytes]) -> EpochResult:
        """Process one epoch (partitions must come in increasing order)."""
        if self.last_partition is not None and epoch_clock(partition) <= epoch_clock(self.last_partition):
            raise ValueError(f"epoch {partition} does not come after {self.last_partition}")
        clock = epoch_clock(partition)
        parsed = parse_files(files, partition)
        distinct = self._dedupe(dedupe_within_batch(parsed.events), clock)
        before = self.watermark
        late = [e for e in distinct if before is not None and e.event_time < before]
        self._sessionize([e for e in distinct if before is None or e.event_time >= before])
        self._advance_watermark(distinct)
        result = EpochResult(partition, parsed, distinct, late, self._emit(), before, self.watermark)
        self.history.append(result)
        self.last_partition = partition
        return result

    def _dedupe(self, events: list[Event], clock: datetime) -> list[Event]:
        self.seen = {k: t for k, t in self.seen.items() if clock - t < self.dedupe_ttl}  # TTL expiry (strict)
        distinct = [e for e in events if e.event_id not in self.seen]
        self.seen.update({e.event_id: clock for e in distinct})
        return distinct

    def _sessionize(self, on_time: list[Event]) -> None:
        by_user: dict[str, list[Session]] = {}
        for e in on_time:
            by_user.setdefault(e.user_id, []).append(_point_session(e))
        for user, points in by_user.items():
            self.open_sessions[user] = merge_sessions(self.open_sessions.get(user, []) + points, self.session_gap)

    def _advance_watermark(self, distinct: list[Event]) -> None:
        if distinct:
            newest = max(e.event_time for e in distinct)
            self.max_event_time = newest if self.max_event_time is None else max(self.max_event_time, newest)
        if self.max_event_time is not None:
            candidate = self.max_event_time - self.allowed_lateness
            self.watermark = candidate if self.watermark is None else max(self.watermark, candidate)

    def _emit(self) -> list[Session]:
        if self.watermark is None:
            return []
        emitted: list[Session] = []
        for user in sorted(self.open_sessions):
            sessions = self.open_sessions[user]
            emitted += [s for s in sessions if s.end + self.session_gap < self.watermark]
            self.open_sessions[user] = [s for s in sessions if not s.end + self.session_gap < self.watermark]
        return emitted

    def sinks(self) -> dict[str, pd.DataFrame]:
        """Every sink after the epochs run so far (plus ``distinct_events``, not a sink)."""
        distinct = [e for r in self.history for e in r.distinct]
        return {
            "quarantine": quarantine_frame(q for r in self.history for q in r.parsed.quarantine),
            "user_totals": user_totals_frame(distinct),
            "hourly_revenue": hourly_revenue_frame(distinct),
            "sessions": sessions_frame(s for r in self.history for s in r.emitted),
            "late_events": events_frame(e for r in self.history for e in r.late),
            "distinct_events": events_frame(distinct),
        }


def expected_sinks(
    landing_dir: str,
    partitions: Sequence[str],
    *,
    dedupe_ttl: timedelta = DEFAULT_DEDUPE_TTL,
    session_gap: timedelta = DEFAULT_SESSION_GAP,
    allowed_lateness: timedelta = DEFAULT_ALLOWED_LATENESS,
) -> dict[str, pd.DataFrame]:
    """The sinks after running ``partitions`` (hourly keys, increasing) over the landing data.

    Keys: ``quarantine``, ``user_totals``, ``hourly_revenue``, ``sessions``,
    ``late_events``, and ``distinct_events`` (the deduplicated events, for debugging).
    Columns are those of the Spark sinks; timestamps are ``datetime64[us, UTC]``,
    counts ``int64``, amounts and revenues ``float64`` (null amount: NaN); rows
    are sorted by the natural key.
    """
    pipeline = ReferencePipeline(dedupe_ttl, session_gap, allowed_lateness)
    for partition in partitions:
        pipeline.run_epoch(partition, read_partition(landing_dir, partition))
    return pipeline.sinks()


# ----------------------------------------------------------------------------- frames

TIMESTAMP_DTYPE = "datetime64[us, UTC]"
EVENT_COLUMNS = ("event_id", "user_id", "event_type", "amount", "event_time", "partition", "source_file")


def _frame(rows: list[dict[str, object]], dtypes: dict[str, str], sort: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=t) for c, t in dtypes.items()})
    return frame.sort_values(sort, kind="stable", ignore_index=True) if len(frame) else frame


def events_frame(events: Iterable[Event]) -> pd.DataFrame:
    """Events as a frame with the Spark events columns."""
    dtypes = dict(zip(EVENT_COLUMNS, ("object", "object", "object", "float64", TIMESTAMP_DTYPE, "object", "object")))
    rows = [{c: getattr(e, c) for c in EVENT_COLUMNS} for e in events]
    return _frame(rows, dtypes, ["partition", "event_time", "event_id"])


def quarantine_frame(rows: Iterable[Quarantined]) -> pd.DataFrame:
    """Quarantine rows: partition, file, raw, reason."""
    dtypes = {c: "object" for c in ("partition", "file", "raw", "reason")}
    return _frame([vars(q) for q in rows], dtypes, ["partition", "file"])


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _totals(events: list[Event]) -> dict[str, object]:
    amounts = [e.amount for e in events if e.event_type == "purchase" and e.amount is not None]
    return {"purchases": sum(e.event_type == "purchase" for e in events), "revenue": math.fsum(amounts)}


def user_totals_frame(distinct: Iterable[Event]) -> pd.DataFrame:
    """``user_totals``: user_id, events, purchases, revenue, first_event_time, last_event_time."""
    by_user: dict[str, list[Event]] = {}
    for e in distinct:
        by_user.setdefault(e.user_id, []).append(e)
    rows = [
        {"user_id": u, "events": len(es), **_totals(es),
         "first_event_time": min(e.event_time for e in es), "last_event_time": max(e.event_time for e in es)}
        for u, es in by_user.items()
    ]
    dtypes = {"user_id": "object", "events": "int64", "purchases": "int64", "revenue": "float64",
              "first_event_time": TIMESTAMP_DTYPE, "last_event_time": TIMESTAMP_DTYPE}
    return _frame(rows, dtypes, ["user_id"])


def hourly_revenue_frame(distinct: Iterable[Event]) -> pd.DataFrame:
    """``hourly_revenue``: hour (UTC hour start), purchases, revenue; hours with any distinct event."""
    by_hour: dict[datetime, list[Event]] = {}
    for e in distinct:
        by_hour.setdefault(_hour(e.event_time), []).append(e)
    rows = [{"hour": h, **_totals(es)} for h, es in by_hour.items()]
    return _frame(rows, {"hour": TIMESTAMP_DTYPE, "purchases": "int64", "revenue": "float64"}, ["hour"])


def sessions_frame(sessions: Iterable[Session]) -> pd.DataFrame:
    """``sessions``: user_id, session_start, session_end, events, revenue."""
    rows = [
        {"user_id": s.user_id, "session_start": s.start, "session_end": s.end, "events": s.events,
         "revenue": math.fsum(s.amounts)}
        for s in sessions
    ]
    dtypes = {"user_id": "object", "session_start": TIMESTAMP_DTYPE, "session_end": TIMESTAMP_DTYPE,
              "events": "int64", "revenue": "float64"}
    return _frame(rows, dtypes, ["user_id", "session_start"])
