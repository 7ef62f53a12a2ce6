"""The reference's line parser: pure Python (json, datetime), independent of the Spark parser."""

from __future__ import annotations

import json
import re
import sys
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
import fsspec
from epochal.pipeline.examples.clickstream import reasons as R
from epochal.pipeline.examples.clickstream.layout import partition_files

# Jackson's read limits (StreamReadConstraints, Jackson 2.15 in Spark 3.5), which the Spark parser inherits:
# numbers of at most 1000 characters, strings of at most 20,000,000, nesting at most 1000 levels. Spark wraps
# each line in one more level to check that it is exactly one value, so a line may nest 999 levels.
MAX_NUMBER_LENGTH = 1000
MAX_STRING_LENGTH = 20_000_000
MAX_DEPTH = 999
_STRING_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")
_BLANK = re.compile(rb"[ \t\n\x0b\x0c\r]*")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"
_LOCAL = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
_TIME_WITH_OFFSET = re.compile(
    rf"(?P<local>{_LOCAL})(?:\.(?P<fraction>[0-9]{{1,9}}))?(?P<offset>Z|[+-](?:(?:0[0-9]|1[0-7]):[0-5][0-9]|18:00))"
)
_TIME_WITHOUT_OFFSET = re.compile(rf"{_LOCAL}(?:\.[0-9]{{1,9}})?")


# ----------------------------------------------------------------------------- parsing

@dataclass(frozen=True)
class ParsedEvent:
    """The fields of a valid line."""

    event_id: str
    user_id: str
    event_type: str
    amount: float | None
    event_time: datetime  # aware, UTC


@dataclass(frozen=True)
class Rejected:
    """A line that goes to quarantine."""

    reason: str
    raw: str


@dataclass(frozen=True)
class Event(ParsedEvent):
    """A valid line of an epoch."""

    partition: str = ""
    source_file: str = ""


@dataclass(frozen=True)
class Quarantined:
    """A quarantine row."""

    partition: str
    file: str
    raw: str
    reason: str


class _BadJson(ValueError):
    pass


def _number(text: str) -> float:
    if len(text) > MAX_NUMBER_LENGTH:
        raise _BadJson("number too long")
    return float(text)  # 1e400 -> inf (then rejected as an amount)


def _constant(text: str) -> float:
    raise _BadJson(f"{text} is not JSON")


class _Object(dict):
    """A JSON object that remembers which names it held more than once."""

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        super().__init__(pairs)
        self.duplicated = {k for k, n in Counter(k for k, _ in pairs).items() if n > 1}


def _load_json(text: str) -> object:
    """Strict JSON within Jackson's limits (raises ValueError)."""
    if _too_deep(text):
        raise _BadJson(f"nested more than {MAX_DEPTH} levels")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + MAX_DEPTH + 100)  # json's C scanner recurses once per level
    try:
        value = json.loads(text, parse_float=_number, parse_int=_number, parse_constant=_constant, object_pairs_hook=_Object)
    finally:
        sys.setrecursionlimit(limit)
    if len(text) > MAX_STRING_LENGTH and _longest_string(value) > MAX_STRING_LENGTH:
        raise _BadJson(f"a string longer than {MAX_STRING_LENGTH} characters")
    return value


def _too_deep(text: str) -> bool:
    """True if the brackets outside strings nest more than MAX_DEPTH levels at some point."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING_TOKEN.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            return True
    return False


def _longest_string(value: object) -> int:
    """The longest key or string in ``value``, in UTF-16 code units (Java's string length)."""
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            longest = max(longest, len(item.encode("utf-16-le", "surrogatepass")) // 2)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return longest


def _utf8_string(value: object) -> object:
    """A string as Spark holds it: an unpaired surrogate becomes ``?``."""
    return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else value


def _is_string(value: object) -> bool:
    return isinstance(value, str)


def _is_number(value: object) -> bool:
    return isinstance(value, float) and not isinstance(value, bool)


def parse_time(text: str) -> datetime | str:
    """The UTC instant of an ``event_time`` text, or the reason code why not."""
    match = _TIME_WITH_OFFSET.fullmatch(text)
    if match is None:
        return R.TIMESTAMP_WITHOUT_OFFSET if _TIME_WITHOUT_OFFSET.fullmatch(text) else R.BAD_TIMESTAMP
    fraction = (match["fraction"] or "")[:6].ljust(6, "0")
    offset = "+00:00" if match["offset"] == "Z" else match["offset"]
    try:
        return datetime.fromisoformat(f"{match['local']}.{fraction}{offset}").astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return R.BAD_TIMESTAMP


def _check_string_field(obj: dict[str, object], name: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return R.missing_field(name)
    if not _is_string(value) or (name in ("event_id", "user_id") and value == ""):
        return R.bad_type(name)
    if name == "event_type" and value not in R.EVENT_TYPES:
        return R.UNKNOWN_EVENT_TYPE
    return None


def _check_amount(obj: dict[str, object]) -> str | None:
    amount = obj.get("amount")
    if amount is None:
        return R.MISSING_AMOUNT
    if not _is_number(amount) or not math.isfinite(amount):  # type: ignore[arg-type]
        return R.BAD_TYPE_AMOUNT
    return R.NEGATIVE_AMOUNT if amount < 0 else None  # type: ignore[operator]


def _validate(obj: _Object, raw: str) -> ParsedEvent | Rejected:
    for name in R.ALL_FIELDS:
        if name in obj.duplicated:
            return Rejected(R.duplicate_field(name), raw)
    obj = _Object([(k, _utf8_string(v)) for k, v in obj.items()])
    for name in R.STRING_FIELDS:
        reason = _check_string_field(obj, name)
        if reason is None and name == "event_time":
            when = parse_time(obj[name])  # type: ignore[arg-type]
            reason = when if isinstance(when, str) else None
        if reason is not None:
            return Rejected(reason, raw)
    purchase = obj["event_type"] == "purchase"
    if purchase and (reason := _check_amount(obj)) is not None:
        return Rejected(reason, raw)
    amount = float(obj["amount"]) if purchase else None  # type: ignore[arg-type]
    when = parse_time(obj["event_time"])  # type: ignore[arg-type]
    assert isinstance(when, datetime)
    return ParsedEvent(obj["event_id"], obj["user_id"], obj["event_type"], amount, when)  # type: ignore[arg-type]


def parse_line(line: bytes | str) -> ParsedEvent | Rejected | None:
    """Classify one line (bytes as read, or text): ``None`` if blank, else an event or a rejection."""
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if _BLANK.fullmatch(data):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Rejected(R.BAD_ENCODING, data.decode("latin-1"))
    try:
        obj = _load_json(text)
    except (ValueError, RecursionError):
        return Rejected(R.NOT_JSON, text)
    if not isinstance(obj, _Object):
        return Rejected(R.NOT_OBJECT, text)
    return _validate(obj, text)


def split_lines(data: bytes) -> list[bytes]:
    """A file's lines as Hadoop's line reader gives them."""
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data:
        return []
    lines = _LINE_BREAK.split(data)
    return lines[:-1] if lines[-1] == b"" else lines


@dataclass
class ParsedFiles:
    """The events, quarantine rows and blank-line count of some files."""

    events: list[Event] = field(default_factory=list)
    quarantine: list[Quarantined] = field(default_factory=list)
    blank: int = 0


def parse_files(files: Mapping[str, bytes], partition: str) -> ParsedFiles:
    """Parse every line of ``files`` (name -> content, taken in name order) for one epoch."""
    out = ParsedFiles()
    for name in sorted(files):
        for line in split_lines(files[name]):
            parsed = parse_line(line)
            if parsed is None:
                out.blank += 1
            elif isinstance(parsed, Rejected):
                out.quarantine.append(Quarantined(partition, name, parsed.raw, parsed.reason))
            else:
                out.events.append(Event(**vars(parsed), partition=partition, source_file=name))
    return out


def read_partition(landing: str, partition: str) -> dict[str, bytes]:
    """The raw bytes of every file of a partition, keyed by ``layout.partition_files`` names."""
    out = {}
    for path in partition_files(landing, partition):
        with fsspec.open(path, "rb") as fh:
            out[path] = fh.read()
    return out
