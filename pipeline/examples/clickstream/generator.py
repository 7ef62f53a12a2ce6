"""Deterministic clickstream landing data: valid events plus every kind of bad line.

``generate(landing, start, hours, config)`` writes, for each UTC hour,
``<landing>/dt=YYYY-MM-DD/hour=HH/part-NNNN.jsonl`` through fsspec and returns
a :class:`Manifest` (what was written, counted per hour). The same config
(seed included) always gives the same bytes, wherever the landing is.

Each hour holds, shuffled together:

- ``events_per_hour`` new valid events (``view`` / ``add_to_cart`` /
  ``purchase``) of the hour's active users, with event times inside the folder
  hour, in ``Z``, ``+00:00`` or non-UTC offsets (``+02:00``, ``-05:00``,
  ``+05:30``) and 0, 3 or 6 fraction digits. Purchases carry an amount >= 0;
  views and carts mostly have none, sometimes a number, ``null`` or a string
  (present but ignored, so still valid). A share (``late_rate``) of the new
  events is late: its event time is 65 minutes to 3 hours before the folder
  hour (whether the pipeline treats it as late depends on its watermark).
- ``round(duplicate_rate * events_per_hour)`` exact duplicates: the very same
  line as an event emitted earlier (mostly in an earlier hour; in the first
  hour, and now and then later, earlier in the same hour).
- ``round(malformed_rate * events_per_hour)`` bad lines, cycling through
  :data:`MALFORMED_KINDS` across hours (so every kind appears once enough bad
  lines were written); each kind has exactly one defect and so one reason.
- ``round(blank_rate * events_per_hour)`` (at least one) blank lines.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone

import fsspec

from epochal.pipeline.examples.clickstream import reasons
from epochal.pipeline.examples.clickstream.layout import HOUR, hour_dir, part_file_name, partition_key

Obj = dict[str, object]


@dataclass(frozen=True)
class GeneratorConfig:
    """The knobs of the generator (all deterministic given ``seed``)."""

    users: int = 20
    events_per_hour: int = 200
    duplicate_rate: float = 0.05
    late_rate: float = 0.05
    malformed_rate: float = 0.05
    blank_rate: float = 0.01
    seed: int = 1
    files_per_hour: int = 1
    active_user_share: float = 0.5

    def __post_init__(self) -> None:
        if self.users < 1 or self.events_per_hour < 0 or self.files_per_hour < 1:
            raise ValueError("users and files_per_hour must be >= 1, events_per_hour >= 0")
        for name in ("duplicate_rate", "late_rate", "malformed_rate", "blank_rate", "active_user_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")


@dataclass
class HourManifest:
    """What one hour folder received."""

    partition: str
    files: list[str]
    lines: int = 0
    new_events: int = 0
    duplicates: int = 0
    late: int = 0
    non_utc: int = 0
    blank: int = 0
    malformed: dict[str, int] = field(default_factory=dict)  # expected reason code -> lines

    @property
    def valid(self) -> int:
        """Lines that parse as events (new events and duplicates)."""
        return self.new_events + self.duplicates


@dataclass
class Manifest:
    """Everything :func:`generate` wrote."""

    landing: str
    config: GeneratorConfig
    hours: list[HourManifest]

    def totals(self) -> dict[str, int]:
        """Counts summed over the hours (``malformed:<reason>`` per reason)."""
        total: Counter[str] = Counter()
        for h in self.hours:
            total.update({k: getattr(h, k) for k in ("lines", "new_events", "duplicates", "late", "non_utc", "blank")})
            total.update({f"malformed:{r}": n for r, n in h.malformed.items()})
        return dict(sorted(total.items()))

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "landing": self.landing,
            "config": asdict(self.config),
            "hours": [asdict(h) | {"valid": h.valid} for h in self.hours],
            "totals": self.totals(),
        }


# ----------------------------------------------------------------------------- valid events

_OFFSETS: tuple[tuple[str, float], ...] = (("Z", 0.45), ("+00:00", 0.2), ("+02:00", 0.2), ("-05:00", 0.1), ("+05:30", 0.05))
_TYPES: tuple[tuple[str, float], ...] = (("view", 0.6), ("add_to_cart", 0.25), ("purchase", 0.15))


def _pick(rng: random.Random, weighted: Sequence[tuple[str, float]]) -> str:
    return rng.choices([v for v, _ in weighted], weights=[w for _, w in weighted])[0]


def format_time(moment: datetime, offset: str, fraction_digits: int) -> str:
    """ISO-8601 text of ``moment`` shown in ``offset`` (``Z`` or ``+HH:MM``)."""
    delta = timedelta(0) if offset == "Z" else _offset_delta(offset)
    local = moment.astimezone(timezone(delta))
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if fraction_digits:
        text += "." + f"{local.microsecond:06d}"[:fraction_digits]
    return text + offset


def _offset_delta(offset: str) -> timedelta:
    sign = -1 if offset[0] == "-" else 1
    return sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))


def _event_time(rng: random.Random, hour_start: datetime, late: bool) -> datetime:
    if late:
        return hour_start - timedelta(seconds=rng.uniform(65 * 60, 3 * 3600))
    return hour_start + timedelta(seconds=rng.uniform(0, 3600 - 1e-3))


def _amount_field(rng: random.Random, event_type: str) -> tuple[bool, object]:
    """``(present, value)`` of the amount field of a valid event."""
    roll = rng.random()
    if event_type == "purchase":
        if roll < 0.03:
            return True, 0
        return True, (rng.randint(1, 200) if roll < 0.1 else round(rng.uniform(0.5, 300.0), 2))
    if roll < 0.7:
        return False, None
    if roll < 0.9:
        return True, round(rng.uniform(0.0, 50.0), 2)
    return True, (None if roll < 0.95 else "n/a")


def make_event(rng: random.Random, user: str, hour_start: datetime, late: bool) -> tuple[Obj, bool]:
    """One valid event object and whether its time is shown in a non-UTC offset."""
    event_type = _pick(rng, _TYPES)
    offset = _pick(rng, _OFFSETS)
    moment = _event_time(rng, hour_start, late)
    obj: Obj = {
        "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "user_id": user,
        "event_type": event_type,
        "event_time": format_time(moment, offset, rng.choice((0, 0, 3, 6))),
    }
    present, amount = _amount_field(rng, event_type)
    if present:
        obj["amount"] = amount
    if rng.random() < 0.1:
        obj["page"] = f"/p/{rng.randint(1, 999)}"  # unknown fields are ignored
    return obj, offset not in ("Z", "+00:00")


def dumps(obj: object) -> str:
    """The compact JSON text the generator writes."""
    return json.dumps(obj, separators=(",", ":"))


# ----------------------------------------------------------------------------- bad lines

def _without(name: str) -> Callable[[Obj, random.Random], bytes]:
    return lambda o, rng: dumps({k: v for k, v in o.items() if k != name}).encode()


def _with(name: str, value: object) -> Callable[[Obj, random.Random], bytes]:
    return lambda o, rng: dumps(o | {name: value}).encode()


def _purchase(**changes: object) -> Callable[[Obj, random.Random], bytes]:
    def build(o: Obj, rng: random.Random) -> bytes:
        base = {k: v for k, v in o.items() if k != "amount"} | {"event_type": "purchase"}
        return dumps(base | changes).encode()

    return build


def _bad_timestamp(o: Obj, rng: random.Random) -> bytes:
    text = rng.choice(("yesterday", "2026-13-01T00:00:00Z", "2026-02-30T10:00:00+02:00", "2026-11-01 10:00:00Z", "2026-11-01"))
    return dumps(o | {"event_time": text}).encode()


def _bad_encoding(o: Obj, rng: random.Random) -> bytes:
    return dumps(o).encode().replace(b'"user_id":"', b'"user_id":"\xff\xfe', 1)


#: kind -> (expected reason, builder from a valid event object to the bad line's bytes)
MALFORMED_KINDS: dict[str, tuple[str, Callable[[Obj, random.Random], bytes]]] = {
    "truncated_json": (reasons.NOT_JSON, lambda o, rng: dumps(o)[: len(dumps(o)) // 2].encode()),
    "plain_text": (reasons.NOT_JSON, lambda o, rng: b"this is not json"),
    "single_quotes": (reasons.NOT_JSON, lambda o, rng: dumps(o).replace('"', "'").encode()),
    "trailing_garbage": (reasons.NOT_JSON, lambda o, rng: dumps(o).encode() + b" trailing"),
    "json_array": (reasons.NOT_OBJECT, lambda o, rng: dumps([o]).encode()),
    "json_number": (reasons.NOT_OBJECT, lambda o, rng: b"42"),
    "json_string": (reasons.NOT_OBJECT, lambda o, rng: dumps(dumps(o)).encode()),
    "missing_event_id": (reasons.missing_field("event_id"), _without("event_id")),
    "missing_user_id": (reasons.missing_field("user_id"), _without("user_id")),
    "missing_event_type": (reasons.missing_field("event_type"), _without("event_type")),
    "missing_event_time": (reasons.missing_field("event_time"), _without("event_time")),
    "user_id_number": (reasons.bad_type("user_id"), _with("user_id", 12345)),
    "event_id_empty": (reasons.bad_type("event_id"), _with("event_id", "")),
    "event_time_number": (reasons.bad_type("event_time"), _with("event_time", 1793520000)),
    "event_type_number": (reasons.bad_type("event_type"), _with("event_type", 3)),
    "duplicate_user_id": (reasons.duplicate_field("user_id"), lambda o, rng: dumps(o)[:-1].encode() + b',"user_id":"u99999"}'),
    "unknown_event_type": (reasons.UNKNOWN_EVENT_TYPE, _with("event_type", "click")),
    "timestamp_without_offset": (reasons.TIMESTAMP_WITHOUT_OFFSET, _with("event_time", "2026-11-01T10:00:00")),
    "bad_timestamp": (reasons.BAD_TIMESTAMP, _bad_timestamp),
    "negative_amount": (reasons.NEGATIVE_AMOUNT, _purchase(amount=-5.0)),
    "amount_not_numeric": (reasons.BAD_TYPE_AMOUNT, _purchase(amount="abc")),
    "purchase_missing_amount": (reasons.MISSING_AMOUNT, _purchase()),
    "bad_encoding": (reasons.BAD_ENCODING, _bad_encoding),
}

_BLANKS = (b"", b"   ", b"\t", b" \t ")


# ----------------------------------------------------------------------------- one hour

class _Generator:
    """Holds the random stream and the cross-hour memory (earlier lines, kind cycle)."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.users = [f"u{i:05d}" for i in range(config.users)]
        self.earlier: list[bytes] = []  # valid new-event lines of earlier hours
        self.kind_cursor = 0

    def hour(self, hour_start: datetime) -> tuple[list[bytes], HourManifest]:
        c, rng = self.config, self.rng
        m = HourManifest(partition=partition_key(hour_start), files=[])
        active = [u for u in self.users if rng.random() < c.active_user_share] or [rng.choice(self.users)]
        new: list[bytes] = []
        for _ in range(c.events_per_hour):
            late = rng.random() < c.late_rate
            obj, non_utc = make_event(rng, rng.choice(active), hour_start, late)
            new.append(dumps(obj).encode())
            m.late += late
            m.non_utc += non_utc
        lines = list(new) + self._duplicates(new, m) + self._malformed(active, hour_start, m)
        m.blank = max(1, round(c.blank_rate * c.events_per_hour))
        lines += [rng.choice(_BLANKS) for _ in range(m.blank)]
        rng.shuffle(lines)
        m.new_events, m.lines = len(new), len(lines)
        self.earlier.extend(new)
        return lines, m

    def _duplicates(self, new: list[bytes], m: HourManifest) -> list[bytes]:
        wanted = round(self.config.duplicate_rate * self.config.events_per_hour)
        out = []
        for _ in range(wanted):
            pool = self.earlier if self.earlier and self.rng.random() < 0.8 else new
            if pool:
                out.append(self.rng.choice(pool))
        m.duplicates = len(out)
        return out

    def _malformed(self, active: list[str], hour_start: datetime, m: HourManifest) -> list[bytes]:
        kinds = list(MALFORMED_KINDS)
        out = []
        for _ in range(round(self.config.malformed_rate * self.config.events_per_hour)):
            reason, build = MALFORMED_KINDS[kinds[self.kind_cursor % len(kinds)]]
            self.kind_cursor += 1
            base, _ = make_event(self.rng, self.rng.choice(active), hour_start, late=False)
            out.append(build(base, self.rng))
            m.malformed[reason] = m.malformed.get(reason, 0) + 1
        return out


def _write_hour(landing: str, hour_start: datetime, lines: list[bytes], files: int) -> list[str]:
    fs, root = fsspec.core.url_to_fs(landing)
    folder = hour_dir(root, hour_start)
    fs.makedirs(folder, exist_ok=True)
    per_file = -(-len(lines) // files) if lines else 0
    written = []
    for i in range(files):
        chunk = lines[i * per_file : (i + 1) * per_file]
        path = f"{folder}/{part_file_name(i)}"
        with fs.open(path, "wb") as fh:
            fh.write(b"".join(line + b"\n" for line in chunk))
        written.append(fs.unstrip_protocol(path) if "://" in landing else path)
    return written


def generate(landing: str, start: datetime, hours: int, config: GeneratorConfig | None = None) -> Manifest:
    """Write ``hours`` hour folders from the UTC hour ``start`` (naive means UTC); return the manifest."""
    config = config or GeneratorConfig()
    start = start.replace(tzinfo=timezone.utc) if start.tzinfo is None else start.astimezone(timezone.utc)
    if start.minute or start.second or start.microsecond:
        raise ValueError(f"start must be a whole hour, got {start.isoformat()}")
    gen = _Generator(config)
    manifests = []
    for i in range(hours):
        hour_start = start + i * HOUR
        lines, m = gen.hour(hour_start)
        m.files = _write_hour(landing, hour_start, lines, config.files_per_hour)
        manifests.append(m)
    return Manifest(landing=landing, config=config, hours=manifests)


# ----------------------------------------------------------------------------- command line

def parse_start(text: str) -> datetime:
    """A start hour: ``2026-11-01T00``, a partition key ``2026-11-01-00:00`` or any ISO-8601 time."""
    for fmt in ("%Y-%m-%dT%H", "%Y-%m-%d-%H:%M"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m epochal.pipeline.examples.clickstream.generator --landing DIR --start 2026-11-01T00 --hours 6``."""
    d = GeneratorConfig()
    p = argparse.ArgumentParser(description="Write deterministic clickstream landing data; print the manifest as JSON.")
    p.add_argument("--landing", required=True, help="landing root (local path or fsspec URL)")
    p.add_argument("--start", required=True, type=parse_start, help="first UTC hour, e.g. 2026-11-01T00")
    p.add_argument("--hours", type=int, default=6)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--users", type=int, default=d.users)
    p.add_argument("--events-per-hour", type=int, default=d.events_per_hour)
    p.add_argument("--duplicate-rate", type=float, default=d.duplicate_rate)
    p.add_argument("--late-rate", type=float, default=d.late_rate)
    p.add_argument("--malformed-rate", type=float, default=d.malformed_rate)
    p.add_argument("--blank-rate", type=float, default=d.blank_rate)
    p.add_argument("--files-per-hour", type=int, default=d.files_per_hour)
    a = p.parse_args(argv)
    try:
        config = GeneratorConfig(
            users=a.users, events_per_hour=a.events_per_hour, duplicate_rate=a.duplicate_rate,
            late_rate=a.late_rate, malformed_rate=a.malformed_rate, blank_rate=a.blank_rate,
            seed=a.seed, files_per_hour=a.files_per_hour,
        )
        manifest = generate(a.landing, a.start, a.hours, config)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json.dump(manifest.to_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
