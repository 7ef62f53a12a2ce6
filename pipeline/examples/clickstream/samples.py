"""Hand-written sample lines, one or more per outcome, with what parsing must give.

Used by the tests of both parsers (and handy for anyone testing a sink):
``SAMPLES`` is a list of :class:`Sample`; ``expected`` is a reason code, or
``VALID`` (an event; then ``event_time_utc`` and ``amount`` are what the event
must hold), or ``BLANK``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from epochal.pipeline.examples.clickstream import reasons as R

VALID = "valid"
BLANK = "blank"


@dataclass(frozen=True)
class Sample:
    """One line and the expected outcome."""

    line: bytes
    expected: str
    event_time_utc: datetime | None = None
    amount: float | None = None


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _event(**changes: object) -> bytes:
    base: dict[str, object] = {
        "event_id": "e-base",
        "user_id": "u1",
        "event_type": "view",
        "event_time": "2026-11-01T10:00:00Z",
    }
    base.update(changes)
    return json.dumps({k: v for k, v in base.items() if v is not _DROP}).encode()


_DROP = object()
_T = _utc(2026, 11, 1, 10)

SAMPLES: list[Sample] = [
    # --- valid events
    Sample(_event(event_id="v1"), VALID, _T),
    Sample(_event(event_id="v1"), VALID, _T),  # the same event twice in one epoch
    Sample(_event(event_id="v2", event_type="purchase", amount=12.5, event_time="2026-11-01T12:30:00.123456+02:00"),
           VALID, _utc(2026, 11, 1, 10, 30, 0, 123456), 12.5),
    Sample(_event(event_id="v3", event_type="purchase", amount=7), VALID, _T, 7.0),
    Sample(_event(event_id="v4", event_type="purchase", amount=0), VALID, _T, 0.0),
    Sample(_event(event_id="v5", event_type="view", amount="abc"), VALID, _T),  # ignored amount
    Sample(_event(event_id="v6", event_type="add_to_cart", amount=-3), VALID, _T),  # ignored amount
    Sample(_event(event_id="v7", event_time="2026-11-01T05:00:00.123456789-05:00"), VALID, _utc(2026, 11, 1, 10, 0, 0, 123456)),
    Sample(_event(event_id="v8", event_time="2026-11-01T10:00:00-00:00", page={"a": [1, None]}), VALID, _T),
    Sample(b'  {"event_id":"v9","user_id":"\\u00fc\xc3\xa9","event_type":"view","event_time":"2026-11-01T10:00:00.5Z"} \t',
           VALID, _utc(2026, 11, 1, 10, 0, 0, 500000)),
    Sample(_event(event_id="v10", event_time="2026-11-01T23:00:00+18:00"), VALID, _utc(2026, 11, 1, 5)),
    # --- blank lines
    Sample(b"", BLANK),
    Sample(b"   ", BLANK),
    Sample(b"\t \x0b\x0c", BLANK),
    # --- not UTF-8
    Sample(b'{"event_id":"x\xff","user_id":"u1","event_type":"view","event_time":"2026-11-01T10:00:00Z"}', R.BAD_ENCODING),
    Sample(b"\xc3\x28 plain", R.BAD_ENCODING),
    # --- not JSON
    Sample(b"this is not json", R.NOT_JSON),
    Sample(b'{"event_id":"x","user_id":', R.NOT_JSON),
    Sample(b"{'event_id':'x'}", R.NOT_JSON),
    Sample(_event(event_id="n1") + b" trailing", R.NOT_JSON),
    Sample(_event(event_id="n2") + b"]", R.NOT_JSON),
    Sample(_event(event_id="n3") + b"}", R.NOT_JSON),
    Sample(_event(event_id="n4") + b"," + _event(event_id="n5"), R.NOT_JSON),
    Sample(b'{"event_id":"n6","user_id":"u1","event_type":"purchase","amount":NaN,"event_time":"2026-11-01T10:00:00Z"}', R.NOT_JSON),
    Sample(b'{"event_id":"n7",}', R.NOT_JSON),
    Sample(b"\xef\xbb\xbf" + _event(event_id="n8"), R.NOT_JSON),  # a BOM is only skipped at the start of a file
    # --- JSON but not an object
    Sample(b"[1,2]", R.NOT_OBJECT),
    Sample(b"42", R.NOT_OBJECT),
    Sample(b'"a string"', R.NOT_OBJECT),
    Sample(b"null", R.NOT_OBJECT),
    Sample(b" true ", R.NOT_OBJECT),
    # --- missing fields (absent or null)
    Sample(_event(event_id=_DROP), R.missing_field("event_id")),
    Sample(_event(event_id=None), R.missing_field("event_id")),
    Sample(_event(user_id=_DROP), R.missing_field("user_id")),
    Sample(_event(event_type=_DROP), R.missing_field("event_type")),
    Sample(_event(event_time=_DROP), R.missing_field("event_time")),
    Sample(b"{}", R.missing_field("event_id")),
    # --- mistyped fields
    Sample(_event(user_id=12345), R.bad_type("user_id")),
    Sample(_event(user_id=["u1"]), R.bad_type("user_id")),
    Sample(_event(event_id=""), R.bad_type("event_id")),
    Sample(_event(event_id={"id": "x"}), R.bad_type("event_id")),
    Sample(_event(event_type=True), R.bad_type("event_type")),
    Sample(_event(event_time=1793520000), R.bad_type("event_time")),
    # --- bad values
    Sample(_event(event_type="click"), R.UNKNOWN_EVENT_TYPE),
    Sample(_event(event_type="View"), R.UNKNOWN_EVENT_TYPE),
    Sample(_event(event_time="2026-11-01T10:00:00"), R.TIMESTAMP_WITHOUT_OFFSET),
    Sample(_event(event_time="2026-11-01T10:00:00.250"), R.TIMESTAMP_WITHOUT_OFFSET),
    Sample(_event(event_time="yesterday"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01 10:00:00Z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-02-30T10:00:00Z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-13-01T10:00:00Z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01T24:00:00Z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01T10:00:60Z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01T10:00:00+0200"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01T10:00:00+19:00"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01T10:00:00z"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="2026-11-01"), R.BAD_TIMESTAMP),
    Sample(_event(event_time="0001-01-01T00:30:00+01:00"), R.BAD_TIMESTAMP),  # before year 1 in UTC
    Sample(_event(event_type="purchase", amount=-5.0), R.NEGATIVE_AMOUNT),
    Sample(_event(event_type="purchase", amount="abc"), R.BAD_TYPE_AMOUNT),
    Sample(_event(event_type="purchase", amount="12.5"), R.BAD_TYPE_AMOUNT),
    Sample(_event(event_type="purchase", amount=True), R.BAD_TYPE_AMOUNT),
    Sample(b'{"event_id":"a1","user_id":"u1","event_type":"purchase","amount":1e400,"event_time":"2026-11-01T10:00:00Z"}',
           R.BAD_TYPE_AMOUNT),
    Sample(_event(event_type="purchase"), R.MISSING_AMOUNT),
    Sample(_event(event_type="purchase", amount=None), R.MISSING_AMOUNT),
]

# --- edge cases both parsers must agree on
SAMPLES += [
    Sample(b'{"event_id":"d1","user_id":"u1","event_type":"purchase","amount":1,"event_time":"2026-11-01T10:00:00Z","amount":"x"}',
           R.duplicate_field("amount")),
    Sample(b'{"event_id":"d2","user_id":"u1","user_id":"u2","event_type":"view","event_time":"2026-11-01T10:00:00Z"}',
           R.duplicate_field("user_id")),
    Sample(b'{"event_id":"d3","user_id":"u1","event_type":"view","event_time":"2026-11-01T10:00:00Z","page":1,"page":2}',
           VALID, _T),
    Sample(b'{"event_id":"d4","user_id":"\\ud800","event_type":"view","event_time":"2026-11-01T10:00:00Z"}', VALID, _T),
    Sample(b'{"Event_id":"d5","user_id":"u1","event_type":"view","event_time":"2026-11-01T10:00:00Z"}', R.missing_field("event_id")),
    Sample(b'{"event_id":"d6","user_id":"u1","event_type":"view","event_time":"2026-11-01T10:00:00Z","z":' + b"[" * 2000 + b"]" * 2000 + b"}",
           R.NOT_JSON),
    Sample(b'{"event_id":"d7","user_id":"u1","event_type":"purchase","amount":' + b"9" * 1001 + b',"event_time":"2026-11-01T10:00:00Z"}',
           R.NOT_JSON),
]
