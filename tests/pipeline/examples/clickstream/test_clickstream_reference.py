"""The pure-Python reference of the clickstream example: parsing rules and epoch semantics (no Spark)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochal.pipeline.examples.clickstream import reasons as R
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
from epochal.pipeline.examples.clickstream.reference import (
    ParsedEvent,
    ReferencePipeline,
    Rejected,
    expected_sinks,
    parse_line,
    parse_time,
    split_lines,
)
from epochal.pipeline.examples.clickstream.samples import BLANK, SAMPLES, VALID

UTC = timezone.utc


def _raw(line: bytes) -> str:
    """The expected ``raw`` of a quarantined line: its UTF-8 text, or its bytes read as Latin-1."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")
T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: f"{s.expected}:{s.line[:40]!r}")
def test_samples(sample) -> None:
    result = parse_line(sample.line)
    if sample.expected == BLANK:
        assert result is None
    elif sample.expected == VALID:
        assert isinstance(result, ParsedEvent)
        assert (result.event_time, result.amount) == (sample.event_time_utc, sample.amount)
        assert result.event_time.utcoffset() == timedelta(0)
    else:
        assert result == Rejected(sample.expected, _raw(sample.line))


def test_split_lines_like_hadoop() -> None:
    assert split_lines(b"") == [] and split_lines(b"\xef\xbb\xbf") == []
    assert split_lines(b"\xef\xbb\xbfa\nb\r\nc\rd") == [b"a", b"b", b"c", b"d"]
    assert split_lines(b"a\n\nb\n") == [b"a", b"", b"b"]
    assert split_lines(b"a\r\r\nb\r") == [b"a", b"", b"b"]


# ----------------------------------------------------------------------------- properties

def _check(result: object, line: bytes) -> None:
    if result is None:
        assert line.strip(b" \t\n\x0b\x0c\r") == b""
    elif isinstance(result, Rejected):
        assert result.reason in R.ALL_REASONS
        assert result.raw == _raw(line)
    else:
        assert isinstance(result, ParsedEvent)
        assert result.event_id and result.user_id and result.event_type in R.EVENT_TYPES
        assert result.event_time.tzinfo is UTC
        if result.event_type == "purchase":
            assert result.amount is not None and math.isfinite(result.amount) and result.amount >= 0
        else:
            assert result.amount is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_blank_event_or_quarantined(text: str) -> None:
    _check(parse_line(text), text.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary())
def test_any_bytes_are_blank_event_or_quarantined(data: bytes) -> None:
    _check(parse_line(data), data)


_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
_json_values = st.recursive(_json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=6)
_times = st.sampled_from(["2026-11-01T10:00:00Z", "2026-11-01T10:00:00+02:00", "2026-11-01T10:00:00", "x", "2026-02-29T00:00:00Z"])
_fields = {
    "event_id": st.text(max_size=3) | _json_values,
    "user_id": st.text(max_size=3) | _json_values,
    "event_type": st.sampled_from(["view", "add_to_cart", "purchase", "Purchase", ""]) | _json_values,
    "event_time": _times | _json_values,
    "amount": st.floats(allow_nan=False) | st.integers() | _json_values,
}


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({}, optional=_fields), st.dictionaries(st.text(max_size=3), _json_values, max_size=2))
def test_near_miss_objects(fields: dict, extra: dict) -> None:
    obj = {**extra, **fields}
    line = json.dumps(obj).encode()  # may hold Infinity: then not JSON
    result = parse_line(line)
    _check(result, line)
    if isinstance(result, ParsedEvent):
        assert (result.event_id, result.user_id, result.event_type) == (obj["event_id"], obj["user_id"], obj["event_type"])


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2400, 1, 1), timezones=st.just(UTC)),
    st.integers(min_value=-18 * 60 + 1, max_value=18 * 60 - 1),
)
def test_time_with_any_offset_is_the_same_instant(moment: datetime, offset_minutes: int) -> None:
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    assert parse_time(local.isoformat(timespec="microseconds")) == moment
    assert parse_time(local.replace(tzinfo=None).isoformat()) == R.TIMESTAMP_WITHOUT_OFFSET


# ----------------------------------------------------------------------------- epoch semantics

def _line(event_id: str, user: str, minute: float, event_type: str = "view", amount: float | None = None) -> bytes:
    obj = {"event_id": event_id, "user_id": user, "event_type": event_type,
           "event_time": (T0 + timedelta(minutes=minute)).isoformat()}
    if amount is not None:
        obj["amount"] = amount
    return json.dumps(obj).encode()


def _epoch(pipeline: ReferencePipeline, hour: int, *lines: bytes):
    key = f"2026-11-01-{hour:02d}:00"
    return pipeline.run_epoch(key, {f"dt=2026-11-01/hour={hour:02d}/part-0000.jsonl": b"\n".join(lines) + b"\n"})


def test_sessions_watermark_and_late_events() -> None:
    p = ReferencePipeline()
    # epoch 10:00: nothing can be late yet; u1 has events at 10:00, 10:30 (gap exactly 30 min: same session)
    r1 = _epoch(p, 10, _line("a", "u1", 0), _line("b", "u1", 30, "purchase", 5.0), _line("c", "u2", 50))
    assert r1.watermark_before is None and r1.late == [] and r1.emitted == []
    assert r1.watermark_after == T0 + timedelta(minutes=50) - timedelta(hours=1)
    # epoch 11:00: W at start = 09:50, so an event at 09:40 is late; 10:59 joins u1's session; 11:50 -> W = 10:50
    r2 = _epoch(p, 11, _line("late", "u1", -20, "purchase", 2.0), _line("d", "u1", 59), _line("e", "u2", 110))
    assert [e.event_id for e in r2.late] == ["late"]
    assert r2.watermark_after == T0 + timedelta(minutes=50)
    assert r2.emitted == []  # u1 ends 10:59 (+30 min = 11:29), u2's first ends 10:50 (11:20): not before 10:50
    # epoch 12:00: 12:45 -> W = 11:45: both close and are emitted; u2's 11:50 and 12:45 stay open
    r3 = _epoch(p, 12, _line("f", "u2", 165))
    assert [(s.user_id, s.start, s.end, s.events) for s in r3.emitted] == [
        ("u1", T0, T0 + timedelta(minutes=59), 3),
        ("u2", T0 + timedelta(minutes=50), T0 + timedelta(minutes=50), 1),
    ]
    assert _epoch(p, 13).emitted == []  # no new event: the watermark stays, nothing more closes
    sinks = p.sinks()
    assert sinks["sessions"]["revenue"].tolist() == [5.0, 0.0]
    # the late event counts in the totals but not in sessions; u2's sessions stay open (never flushed)
    totals = sinks["user_totals"].set_index("user_id")
    assert totals.loc["u1", ["events", "purchases", "revenue"]].tolist() == [4, 2, 7.0]
    assert totals.loc["u1", "first_event_time"] == pd.Timestamp(T0 - timedelta(minutes=20))
    assert sinks["late_events"]["event_id"].tolist() == ["late"]
    assert sinks["late_events"]["partition"].tolist() == ["2026-11-01-11:00"]
    hourly = sinks["hourly_revenue"].set_index("hour")
    assert hourly.loc[pd.Timestamp(T0 - timedelta(hours=1)), "revenue"] == 2.0
    assert hourly.loc[pd.Timestamp(T0), ["purchases", "revenue"]].tolist() == [1, 5.0]


def test_a_gap_over_30_minutes_splits_and_an_event_can_merge_sessions() -> None:
    p = ReferencePipeline()
    _epoch(p, 10, _line("a", "u1", 0), _line("b", "u1", 30.5))  # 30.5 min apart: two sessions
    assert [(s.start, s.end) for s in p.open_sessions["u1"]] == [(T0, T0), (T0 + timedelta(minutes=30.5),) * 2]
    _epoch(p, 11, _line("c", "u1", 15))  # not late (W = 09:30.5): bridges both
    assert [(s.start, s.end, s.events) for s in p.open_sessions["u1"]] == [(T0, T0 + timedelta(minutes=30.5), 3)]


def test_dedupe_within_and_across_epochs_with_ttl() -> None:
    p = ReferencePipeline(dedupe_ttl=timedelta(hours=2))
    first = _line("x", "u1", 0)
    assert [e.event_id for e in _epoch(p, 10, first, first, _line("y", "u1", 1)).distinct] == ["x", "y"]
    assert _epoch(p, 11, first).distinct == []  # 1h < TTL: duplicate
    again = _epoch(p, 12, first, _line("y", "u1", 1))  # 13:00 - 11:00 = 2h, not < TTL: both pass again (Flink's rule)
    assert [e.event_id for e in again.distinct] == ["x", "y"]
    assert _epoch(p, 13, first).distinct == []  # the state now holds the new acceptance
    assert p.sinks()["user_totals"]["events"].tolist() == [4]


def test_within_batch_keeps_the_first_by_file_then_time() -> None:
    p = ReferencePipeline()
    result = p.run_epoch("2026-11-01-10:00", {"b.jsonl": _line("x", "u1", 0), "a.jsonl": _line("x", "u2", 5)})
    assert [(e.user_id, e.source_file) for e in result.distinct] == [("u2", "a.jsonl")]


def test_epochs_must_increase() -> None:
    p = ReferencePipeline()
    _epoch(p, 10)
    with pytest.raises(ValueError):
        _epoch(p, 10)


def test_expected_sinks_on_generated_landing(tmp_path) -> None:
    landing = str(tmp_path / "landing")
    manifest = generate(landing, T0, 4, GeneratorConfig(events_per_hour=60, seed=5))
    sinks = expected_sinks(landing, [h.partition for h in manifest.hours])
    assert set(sinks) == {"quarantine", "user_totals", "hourly_revenue", "sessions", "late_events", "distinct_events"}
    distinct = sinks["distinct_events"]
    assert distinct["event_id"].is_unique and len(distinct) == sum(h.new_events for h in manifest.hours)
    assert len(sinks["quarantine"]) == sum(sum(h.malformed.values()) for h in manifest.hours)
    assert sinks["user_totals"]["events"].sum() == len(distinct)
    purchases = distinct[distinct.event_type == "purchase"]
    assert sinks["hourly_revenue"]["purchases"].sum() == len(purchases) == sinks["user_totals"]["purchases"].sum()
    assert math.isclose(sinks["hourly_revenue"]["revenue"].sum(), purchases["amount"].sum(), rel_tol=1e-9)
    late_ids = set(sinks["late_events"]["event_id"])
    assert late_ids and late_ids <= set(distinct["event_id"])
    assert sinks["sessions"]["events"].sum() <= len(distinct) - len(late_ids)
    assert str(sinks["sessions"]["session_start"].dtype) == "datetime64[us, UTC]"
