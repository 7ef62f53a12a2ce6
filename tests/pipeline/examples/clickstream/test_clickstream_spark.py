"""The Spark side of the clickstream example: parsing, batch dedupe, per-batch aggregates.

Few Spark actions on purpose: each fixture collects once, the assertions run on the collected rows.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from epochal.pipeline.examples.clickstream import reference as ref
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
from epochal.pipeline.examples.clickstream.layout import partition_files
from epochal.pipeline.examples.clickstream.parse import EVENT_SCHEMA, QUARANTINE_SCHEMA, dedupe_within_batch, parse_landing
from epochal.pipeline.examples.clickstream.samples import BLANK, SAMPLES, VALID
from epochal.pipeline.examples.clickstream.transforms import (
    hourly_revenue_delta,
    merge_hourly_revenue,
    merge_user_totals,
    user_totals_delta,
)

UTC = timezone.utc


def _raw(line: bytes) -> str:
    """The expected ``raw`` of a quarantined line: its UTF-8 text, or its bytes read as Latin-1."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return line.decode("latin-1")
KEY = "2026-11-01-10:00"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def _collect(batch):
    events = batch.events.withColumn("event_time", F.unix_micros("event_time")).collect()
    return events, batch.quarantine.collect()


@pytest.fixture(scope="module")
def samples_parsed(spark, tmp_path_factory: pytest.TempPathFactory):
    """Every sample line in one file (opened by a BOM, mixed line breaks) in a folder with a space."""
    folder = tmp_path_factory.mktemp("cs") / "landing dir" / "dt=2026-11-01" / "hour=10"
    folder.mkdir(parents=True)
    body = b"\xef\xbb\xbf"
    for i, sample in enumerate(SAMPLES):
        body += sample.line + (b"\r\n" if i % 7 == 3 else b"\r" if i == 5 else b"\n")
    (folder / "part-0000.jsonl").write_bytes(body)
    (folder / "part-0001.jsonl").write_bytes(b"")
    files = [str(folder / "part-0000.jsonl"), str(folder / "part-0001.jsonl")]
    return files, _collect(parse_landing(spark, files, KEY))


def test_ansi_is_on(spark) -> None:
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"


def test_every_bad_line_is_quarantined_with_its_reason_and_raw_text(samples_parsed) -> None:
    files, (events, quarantine) = samples_parsed
    expected = Counter(
        (_raw(s.line), s.expected) for s in SAMPLES if s.expected not in (VALID, BLANK)
    )
    assert Counter((q.raw, q.reason) for q in quarantine) == expected
    assert {(q.partition, q.file) for q in quarantine} == {(KEY, files[0])}
    lines = len(SAMPLES)
    assert len(events) + len(quarantine) + sum(s.expected == BLANK for s in SAMPLES) == lines


def test_valid_lines_become_events_with_utc_instants(samples_parsed) -> None:
    files, (events, _) = samples_parsed
    expected = Counter(
        (ref.parse_line(s.line).event_id, _micros(s.event_time_utc), s.amount) for s in SAMPLES if s.expected == VALID
    )
    assert Counter((e.event_id, e.event_time, e.amount) for e in events) == expected
    assert {(e.partition, e.source_file) for e in events} == {(KEY, files[0])}
    v2 = next(e for e in events if e.event_id == "v2")  # 12:30:00.123456+02:00
    assert (v2.user_id, v2.event_type, v2.event_time) == ("u1", "purchase", _micros(datetime(2026, 11, 1, 10, 30, 0, 123456, tzinfo=UTC)))


def test_spark_and_reference_parse_agree_on_a_generated_hour(spark, tmp_path: Path) -> None:
    landing = str(tmp_path / "landing")
    config = GeneratorConfig(users=5, events_per_hour=40, malformed_rate=0.6, duplicate_rate=0.2, files_per_hour=2, seed=11)
    generate(landing, datetime(2026, 11, 1, 9, tzinfo=UTC), 2, config)
    files = partition_files(landing, KEY)
    events, quarantine = _collect(parse_landing(spark, files, KEY))
    expected = ref.parse_files(ref.read_partition(landing, KEY), KEY)
    assert Counter((q.file, q.raw, q.reason) for q in quarantine) == Counter((q.file, q.raw, q.reason) for q in expected.quarantine)
    assert len({q.reason for q in quarantine}) >= 15
    row = lambda e: (e.event_id, e.user_id, e.event_type, e.amount, e.source_file)  # noqa: E731
    assert Counter(row(e) for e in events) == Counter(row(e) for e in expected.events)
    assert Counter(e.event_time for e in events) == Counter(_micros(e.event_time) for e in expected.events)


def test_no_files_gives_empty_frames_with_the_schemas(spark) -> None:
    batch = parse_landing(spark, [], KEY)
    assert batch.events.schema == EVENT_SCHEMA and batch.quarantine.schema == QUARANTINE_SCHEMA


# ----------------------------------------------------------------------------- dedupe and aggregates

def _events() -> list[ref.Event]:
    t = datetime(2026, 11, 1, 9, 50, tzinfo=UTC)
    rows = [
        ("a", "u1", "view", None, t, "f2"),
        ("a", "u1", "view", None, t, "f1"),  # the same event in two files: f1's copy is kept
        ("b", "u1", "purchase", 10.25, t + timedelta(minutes=15), "f1"),
        ("c", "u2", "purchase", 0.5, t - timedelta(hours=3), "f1"),
        ("d", "u2", "add_to_cart", None, t + timedelta(minutes=5), "f1"),
        ("e", "u1", "purchase", 3.0, t + timedelta(minutes=9, seconds=59, microseconds=999999), "f1"),
    ]
    return [ref.Event(i, u, k, a, w, partition=KEY, source_file=f) for i, u, k, a, w, f in rows]


def _frame(spark, events: list[ref.Event]):
    return spark.createDataFrame([tuple(getattr(e, c.name) for c in EVENT_SCHEMA) for e in events], EVENT_SCHEMA)


def test_dedupe_within_batch_and_aggregates_match_the_reference(spark) -> None:
    events = _events()
    distinct = dedupe_within_batch(_frame(spark, events))
    kept = distinct.select("event_id", "source_file").collect()
    assert sorted(map(tuple, kept)) == sorted((e.event_id, e.source_file) for e in ref.dedupe_within_batch(events))
    expected = ref.dedupe_within_batch(events)

    # fold two batches with merge_*: the result is the aggregate of all distinct events
    first, second = _frame(spark, expected[:2]), _frame(spark, expected[2:])
    totals = merge_user_totals(user_totals_delta(first), user_totals_delta(second))
    totals = totals.select("user_id", "events", "purchases", "revenue", *[F.unix_micros(c).alias(c) for c in ("first_event_time", "last_event_time")])
    want = ref.user_totals_frame(expected)
    got = sorted(tuple(r) for r in totals.collect())
    assert [g[:3] for g in got] == list(want[["user_id", "events", "purchases"]].itertuples(index=False, name=None))
    assert all(math.isclose(g[3], w, rel_tol=1e-9) for g, w in zip(got, want["revenue"]))
    assert [g[4:] for g in got] == [(_micros(a), _micros(b)) for a, b in zip(want["first_event_time"], want["last_event_time"])]

    hourly = merge_hourly_revenue(hourly_revenue_delta(first), hourly_revenue_delta(second))
    got_h = sorted(tuple(r) for r in hourly.select(F.unix_micros("hour"), "purchases", "revenue").collect())
    want_h = ref.hourly_revenue_frame(expected)
    assert [(h, p) for h, p, _ in got_h] == [(_micros(h), p) for h, p in zip(want_h["hour"], want_h["purchases"])]
    assert all(math.isclose(g[2], w, rel_tol=1e-9) for g, w in zip(got_h, want_h["revenue"]))
