"""Fuzzing the clickstream landing parser: hostile bytes never crash it, never slip through, and the Spark
parser agrees with the pure-Python reference on every line.

Lines come from hypothesis (arbitrary bytes and text, near-miss events, events in the wrong encoding or
with NUL bytes, deep nesting around Jackson's depth limit) plus fixed hostile files (MB-long lines, a
UTF-16 file, BOMs). Hypothesis draws the lines without Spark (checking the reference on each); all of
them then go into ONE file parsed by ONE Spark job, compared line by line (as multisets) with
:func:`reference.parse_files` on the same bytes. A disagreement lists the lines concerned.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from epochal.pipeline.examples.clickstream import reasons as R
from epochal.pipeline.examples.clickstream import reference as ref
from epochal.pipeline.examples.clickstream.parse import parse_landing
from tests.support.reliability_doc import markdown_table, write_section

pytestmark = pytest.mark.timeout(1200)

KEY = "2026-11-01-10:00"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MB = 1 << 20

_ids = st.text(min_size=1, max_size=6)
_valid = st.fixed_dictionaries({
    "event_id": _ids, "user_id": _ids, "event_type": st.sampled_from(["view", "add_to_cart", "purchase"]),
    "amount": st.floats(min_value=0, max_value=1e6), "event_time": st.sampled_from(
        ["2026-11-01T10:00:00Z", "2026-11-01T12:30:00.123456789+02:00", "2026-11-01T05:00:00-05:00"]),
})
_json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
_json_values = st.recursive(_json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=8)
_near_miss = st.builds(lambda event, drop, extra: {**{k: v for k, v in event.items() if k not in drop}, **extra},
                       _valid, st.sets(st.sampled_from(list(R.ALL_FIELDS)), max_size=2),
                       st.dictionaries(st.sampled_from([*R.ALL_FIELDS, "x"]), _json_values, max_size=2))
_ENCODINGS = ["latin-1", "utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "cp1252", "utf-32"]


def _dumps(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False)  # non-ASCII as is, so the encodings below matter


def _reencode(obj: dict, encoding: str) -> bytes:
    return _dumps({**obj, "user_id": "é" + obj["user_id"]}).encode(encoding, "surrogatepass" if "utf" in encoding else "replace")


def _with_nul(obj: dict, at: int) -> bytes:
    line = _dumps(obj).encode("utf-8", "surrogatepass")
    at %= len(line) + 1
    return line[:at] + b"\x00" + line[at:]


def _nested(obj: dict, depth: int, kind: str) -> bytes:
    opening, closing = ("[", "]") if kind == "array" else ('{"a":', "}")
    deep = opening * depth + "1" + closing * depth
    if kind == "root":
        return ("[" * depth + "]" * depth).encode()
    return _dumps(obj)[:-1].encode("utf-8", "surrogatepass") + b', "x": ' + deep.encode() + b"}"


LINE = st.one_of(
    st.binary(max_size=120),
    st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
    _valid.map(lambda o: _dumps(o).encode("utf-8", "surrogatepass")),
    _near_miss.map(lambda o: _dumps(o).encode("utf-8", "surrogatepass")),
    st.builds(_reencode, _valid, st.sampled_from(_ENCODINGS)),
    st.builds(_with_nul, _valid, st.integers(min_value=0)),
    st.builds(_nested, _valid, st.integers(min_value=1, max_value=1100) | st.integers(min_value=995, max_value=1002),
              st.sampled_from(["array", "object", "root"])),
)


def _hostile_files() -> dict[str, bytes]:
    """Files no generator writes: MB-long lines, whole files in UTF-16, BOMs, NUL-only lines."""
    event = {"event_id": "big", "user_id": "u" * (2 * MB), "event_type": "view", "event_time": "2026-11-01T10:00:00Z"}
    small = {"event_id": "e1", "user_id": "ü", "event_type": "purchase", "amount": 1.5, "event_time": "2026-11-01T10:00:00Z"}
    lines = "\n".join(_dumps({**small, "event_id": f"u16-{i}"}) for i in range(3)) + "\n"
    return {
        "huge.jsonl": b"\n".join([_dumps(event).encode(), bytes(b for b in range(256) if b not in b"\n\r") * (4 * 1024), b"\x00" * MB,
                                   b"[" * MB, b'{"event_id": "' + b"\xff" * MB + b'"}']) + b"\n",
        "utf16.jsonl": lines.encode("utf-16"),
        "bom.jsonl": b"\xef\xbb\xbf" + lines.encode() + b"\xef\xbb\xbf" + _dumps(small).encode() + b"\n",
    }


def _spark_rows(spark, files: dict[str, str]):
    batch = parse_landing(spark, list(files.values()), KEY)
    names = {path: name for name, path in files.items()}
    events = batch.events.withColumn("event_time", F.unix_micros("event_time")).collect()
    quarantine = batch.quarantine.collect()
    return (
        Counter((names[e.source_file], e.event_id, e.user_id, e.event_type, e.amount, e.event_time) for e in events),
        Counter((names[q.file], q.raw, q.reason) for q in quarantine),
    )


def _reference_rows(contents: dict[str, bytes]):
    parsed = ref.parse_files(contents, KEY)
    micros = lambda t: (t - EPOCH) // timedelta(microseconds=1)  # noqa: E731
    events = Counter((e.source_file, e.event_id, e.user_id, e.event_type, e.amount, micros(e.event_time)) for e in parsed.events)
    return events, Counter((q.file, q.raw, q.reason) for q in parsed.quarantine), parsed.blank


def _fuzzed_lines(count: int) -> list[bytes]:
    """``count`` hypothesis lines, each checked against the reference's own rules on the way (no Spark)."""
    lines: list[bytes] = []

    @settings(max_examples=count, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(LINE)
    def collect(line: bytes) -> None:
        parsed = ref.parse_line(line)  # nothing raises
        if isinstance(parsed, ref.Rejected):
            assert parsed.reason in R.ALL_REASONS
        lines.append(line)

    collect()
    return lines


def test_spark_parser_agrees_with_the_reference_on_fuzzed_lines(spark, tmp_path):
    lines = _fuzzed_lines(600)
    breaks = [b"\n", b"\r\n", b"\r"]
    contents = {"fuzz.jsonl": b"".join(line + breaks[i % 3] for i, line in enumerate(lines)), **_hostile_files()}
    files = {}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
        files[name] = str(tmp_path / name)
    events, quarantine, blank = _reference_rows(contents)
    total = sum(len(ref.split_lines(data)) for data in contents.values())
    assert sum(events.values()) + sum(quarantine.values()) + blank == total, "every line is an event, quarantined or blank"

    spark_events, spark_quarantine = _spark_rows(spark, files)  # one Spark job over every line
    assert spark_quarantine == quarantine, _disagreement(spark_quarantine, quarantine)
    assert spark_events == events, _disagreement(spark_events, events)
    reasons = Counter(reason for _, _, reason in quarantine.elements())
    assert len(reasons) >= 10 and sum(events.values()) >= 50, ("the fuzz reaches few cases", reasons, events)
    _write_figures(len(lines), total, sum(events.values()), reasons, blank, sum(map(len, contents.values())))


def _disagreement(spark: Counter, reference: Counter) -> str:
    only_spark, only_ref = spark - reference, reference - spark
    show = lambda c: [tuple(str(x)[:120] for x in k) for k in list(c)[:5]]  # noqa: E731
    return f"only Spark: {show(only_spark)}; only the reference: {show(only_ref)}"


def _write_figures(generated: int, total: int, events: int, reasons: Counter, blank: int, size: int) -> None:
    rows = [["hypothesis lines", generated], ["lines parsed (with the hostile files)", total],
            ["events", events], ["quarantined", sum(reasons.values())], ["blank", blank],
            ["MB parsed", f"{size / MB:.1f}"], ["parse_landing calls (Spark)", 1], ["disagreements with the reference", 0]]
    seen = ", ".join(f"`{r}` {n}" for r, n in sorted(reasons.items()))
    write_section(
        "parser-fuzz", "Landing parser fuzzing",
        "Hypothesis lines (arbitrary bytes and text, near-miss events, events in latin-1, cp1252, UTF-16/32 and "
        "with a BOM, NUL bytes, nesting up to 1100 levels, around Jackson's limit of 999 per line) and fixed "
        "hostile files (2 MB lines, 1 MB of `[`, a UTF-16 file, BOMs inside a file), parsed in one Spark job "
        "and by the Python reference: every line agrees (event, quarantine reason and raw text), none is lost, "
        "nothing raises.\n\n" + markdown_table(["figure", "value"], rows) + f"\n\nQuarantine reasons seen: {seen}.",
        test=__file__,
    )
