"""The clickstream generator: deterministic bytes, every kind of line, a truthful manifest (no Spark)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import fsspec
import pytest

from epochal.pipeline.examples.clickstream import reasons as R
from epochal.pipeline.examples.clickstream.generator import MALFORMED_KINDS, GeneratorConfig, generate, main, parse_start
from epochal.pipeline.examples.clickstream.layout import (
    day_folder_files,
    partition_files,
    partition_key,
    partition_window,
)
from epochal.pipeline.examples.clickstream.reference import ParsedEvent, Rejected, parse_line, split_lines

START = datetime(2026, 11, 1, tzinfo=timezone.utc)
CONFIG = GeneratorConfig(users=8, events_per_hour=80, malformed_rate=0.15, duplicate_rate=0.1, late_rate=0.1, seed=7)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("gen") / "landing"
    return root, generate(str(root), START, 4, CONFIG)


def test_same_seed_same_bytes_other_seed_other_bytes(landing, tmp_path: Path) -> None:
    root, _ = landing
    generate(str(tmp_path / "again"), START, 4, CONFIG)
    generate(str(tmp_path / "other"), START, 4, GeneratorConfig(**{**vars(CONFIG), "seed": 8}))
    assert _tree(tmp_path / "again") == _tree(root)
    assert _tree(tmp_path / "other").keys() == _tree(root).keys()
    assert _tree(tmp_path / "other") != _tree(root)


def test_layout_and_manifest(landing) -> None:
    root, manifest = landing
    assert [h.partition for h in manifest.hours] == ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00", "2026-11-01-03:00"]
    for h in manifest.hours:
        files = partition_files(str(root), h.partition)
        assert files == h.files and files[0].endswith(f"dt=2026-11-01/hour={h.partition[11:13]}/part-0000.jsonl")
        assert h.lines == sum(len(split_lines(Path(f).read_bytes())) for f in files)
        assert h.lines == h.valid + h.blank + sum(h.malformed.values())


def _outcomes(manifest) -> list[tuple[str, list[ParsedEvent], Counter, int]]:
    out = []
    for h in manifest.hours:
        events, reasons, blank = [], Counter(), 0
        for f in h.files:
            for line in split_lines(Path(f).read_bytes()):
                r = parse_line(line)
                if r is None:
                    blank += 1
                elif isinstance(r, Rejected):
                    reasons[r.reason] += 1
                else:
                    events.append(r)
        out.append((h.partition, events, reasons, blank))
    return out


def test_reference_parse_matches_manifest_and_covers_every_reason(landing) -> None:
    _, manifest = landing
    seen: Counter = Counter()
    for h, (_, events, reasons, blank) in zip(manifest.hours, _outcomes(manifest)):
        assert (len(events), dict(reasons), blank) == (h.valid, h.malformed, h.blank)
        seen.update(reasons)
    assert {reason for reason, _ in MALFORMED_KINDS.values()} == set(seen)
    assert R.ALL_REASONS - set(seen) == {R.duplicate_field(f) for f in R.ALL_FIELDS if f != "user_id"}


def test_duplicates_late_events_offsets_and_ignored_amounts(landing) -> None:
    _, manifest = landing
    lines_by_id: dict[str, set[bytes]] = {}
    hours_by_id: dict[str, set[str]] = {}
    late = 0
    for h in manifest.hours:
        start, _ = partition_window(h.partition)
        for f in h.files:
            for line in split_lines(Path(f).read_bytes()):
                r = parse_line(line)
                if isinstance(r, ParsedEvent):
                    first = r.event_id not in lines_by_id
                    lines_by_id.setdefault(r.event_id, set()).add(line)
                    hours_by_id.setdefault(r.event_id, set()).add(h.partition)
                    late += first and (start - r.event_time).total_seconds() >= 3600
    assert all(len(v) == 1 for v in lines_by_id.values()), "copies of an event must be identical"
    assert sum(len(v) > 1 for v in hours_by_id.values()) > 0, "some events come again in a later hour"
    assert late == sum(h.late for h in manifest.hours) > 0
    assert sum(h.non_utc for h in manifest.hours) > 0
    text = b"".join(Path(f).read_bytes() for h in manifest.hours for f in h.files)
    assert b'+02:00"' in text and b'"event_type":"view"' in text and b'"amount":"n/a"' in text


def test_fsspec_url_landing_and_several_files(tmp_path: Path) -> None:
    url = "memory://clickstream-gen-test/landing"
    manifest = generate(url, START, 1, GeneratorConfig(events_per_hour=30, files_per_hour=3, seed=3))
    files = partition_files(url, partition_key(START))
    assert files == manifest.hours[0].files and len(files) == 3 and all(f.startswith("memory://") for f in files)
    total = sum(len(split_lines(fsspec.open(f, "rb").open().read())) for f in files)
    assert total == manifest.hours[0].lines
    fsspec.filesystem("memory").rm("/clickstream-gen-test", recursive=True)


def test_day_folder_files_names_files_outside_hour_folders_listing_each_day_once(monkeypatch) -> None:
    """A file directly in ``dt=YYYY-MM-DD/`` is in no hour: ``partition_files`` never lists it, ``day_folder_files``
    names it (as a URL for a URL landing), listing the day folder once for a daily partition, not once per hour."""
    url = "memory://clickstream-day-test/landing"
    fs = fsspec.filesystem("memory")
    for name in ("dt=2026-11-01/part-0000.jsonl", "dt=2026-11-01/_SUCCESS", "dt=2026-11-01/hour=05/part-0000.jsonl"):
        fs.pipe(f"/clickstream-day-test/landing/{name}", b"{}\n")
    loose = fs.unstrip_protocol("/clickstream-day-test/landing/dt=2026-11-01/part-0000.jsonl")  # memory:///...
    listed: list[str] = []
    ls = type(fs).ls
    monkeypatch.setattr(type(fs), "ls", lambda self, path, detail=True, **kw: listed.append(path) or ls(self, path, detail, **kw))
    try:
        assert day_folder_files(url, "2026-11-01") == [loose]
        assert [p for p in listed if p.rstrip("/").endswith("dt=2026-11-01")] == listed and len(listed) == 1
        assert day_folder_files(url, "2026-11-01-05:00") == [loose]
        assert day_folder_files(url, "2026-11-02") == []  # a day without a folder
        assert partition_files(url, "2026-11-01") == [loose.replace("/part-", "/hour=05/part-")]
    finally:
        fs.rm("/clickstream-day-test", recursive=True)


def test_cli_writes_and_prints_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--landing", str(tmp_path), "--start", "2026-11-01T00", "--hours", "2", "--seed", "1", "--events-per-hour", "20"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(doc["hours"]) == 2 and doc["totals"]["new_events"] == 40
    assert (tmp_path / "dt=2026-11-01" / "hour=01" / "part-0000.jsonl").is_file()
    assert main(["--landing", str(tmp_path), "--start", "2026-11-01T00", "--duplicate-rate", "2"]) == 2


def test_start_formats_and_partition_keys() -> None:
    assert parse_start("2026-11-01T13") == parse_start("2026-11-01-13:00") == datetime(2026, 11, 1, 13, tzinfo=timezone.utc)
    assert partition_window("2026-11-01-13:00") == (datetime(2026, 11, 1, 13, tzinfo=timezone.utc), datetime(2026, 11, 1, 14, tzinfo=timezone.utc))
    assert partition_window("2026-11-01")[1] == datetime(2026, 11, 2, tzinfo=timezone.utc)
    for bad in ("2026-11-01-13:30", "2026-11-01T13:00", "2026-1-1-13:00"):
        with pytest.raises(ValueError):
            partition_window(bad)
