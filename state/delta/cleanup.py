"""The time side of retention: a grace period for readers, and the Delta log pruned by version.

Retention decides what to keep by VERSION (the versions retained checkpoints
reference, see :mod:`epochal.state.checkpoint.retention`). Two things need
time as well:

* **Grace period** (``checkpoints.cleanup_delay_s``, like VACUUM's retention):
  a query that started before a cleanup reads the version that was the latest
  when it started. Every version that was the latest at some instant of the
  last ``delay`` seconds is kept whole (the versions committed since
  ``now - delay``, and the one that was the latest at ``now - delay``), and a
  file written in that window is never deleted (a write that has not committed
  yet, or a reader's cache that has not caught up).
* **Log pruning**: Delta time travel to version ``v`` needs the newest Delta
  checkpoint at or before ``v`` and the commits after it. Commit files, their
  checksums and checkpoints older than the newest Delta checkpoint at or before
  the oldest needed version are deleted (as Delta's own log cleanup does, by
  version here instead of by ``delta.logRetentionDuration``), once they are
  older than the grace period too. The newest checkpoint, ``_last_checkpoint``
  and everything newer stay, so every needed version stays readable by any
  Delta reader (Spark, delta-rs).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import fsspec

from epochal.state.delta.checkpoints import LOG_DIR, parse_listing
from epochal.state.delta.paths import to_url

# A versioned log entry: <v>.json, <v>.crc, <v>.checkpoint[.<i>.<n>|.<uuid>].(parquet|json),
# <start>.<end>.compacted.json, and the hidden Hadoop checksums of each (.<name>.crc).
_VERSIONED = re.compile(r"^\.?(\d{20})(?:\.(\d{20})\.compacted)?\.")


def modified_at(info: Mapping[str, Any]) -> float | None:
    """Seconds since the epoch at which a listed file was last written (fsspec ``info``), if known."""
    value = info.get("mtime", info.get("LastModified", info.get("last_modified", info.get("created"))))
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value) if value is not None else None


LogEntries = tuple[Any, str, list[dict[str, Any]]]  # (filesystem, log folder, detailed listing)


def log_entries(table_url: str) -> LogEntries:
    """One detailed listing of a table's ``_delta_log``, to share between the functions below."""
    fs, root = fsspec.core.url_to_fs(to_url(table_url))
    log_dir = f"{root.rstrip('/')}/{LOG_DIR}"
    fs.invalidate_cache(log_dir)
    try:
        return fs, log_dir, [e for e in fs.ls(log_dir, detail=True) if e.get("type") != "directory"]
    except FileNotFoundError:
        return fs, log_dir, []


def grace_versions(table_url: str, *, now: float, delay_s: float, listed: LogEntries | None = None) -> set[int]:
    """The versions that were the latest at some instant of ``[now - delay_s, now]``."""
    if delay_s <= 0:
        return set()
    _, _, entries = listed or log_entries(table_url)
    committed = {}
    for entry in entries:
        name = posixpath.basename(str(entry["name"]))
        if name.endswith(".json") and name[:20].isdigit() and len(name) == 25:
            committed[int(name[:20])] = modified_at(entry) or now
    start = now - delay_s
    recent = {v for v, at in committed.items() if at >= start}
    before = [v for v, at in committed.items() if at < start]
    return recent | ({max(before)} if before else set())


def prune_log(
    table_url: str, oldest_needed: int, *, now: float, delay_s: float = 0.0, listed: LogEntries | None = None
) -> list[str]:
    """Delete the log entries no version from ``oldest_needed`` on needs (see the module docstring).

    Returns the URLs deleted. Nothing is deleted when no Delta checkpoint precedes ``oldest_needed``.
    """
    fs, log_dir, entries = listed or log_entries(table_url)
    names = [posixpath.basename(str(e["name"])) for e in entries]
    listing = parse_listing(names)
    base = max((v for v in listing.checkpoints if v <= oldest_needed), default=None)
    if base is None:
        return []
    cutoff = now - delay_s
    deleted = []
    for entry, name in zip(entries, names):
        found = _VERSIONED.match(name)
        if found is None:
            continue
        last_version = int(found.group(2) or found.group(1))
        written = modified_at(entry)
        if last_version < base and (written is None or written <= cutoff):
            try:
                fs.rm_file(f"{log_dir}/{name}")
            except FileNotFoundError:
                continue
            deleted.append(f"{to_url(table_url)}/{LOG_DIR}/{name}")
    return deleted


def recently_written(fs: Any, root: str, relative_paths: Iterable[str], *, now: float, delay_s: float) -> set[str]:
    """Those of ``relative_paths`` (under ``root``) written within the last ``delay_s`` seconds."""
    if delay_s <= 0:
        return set()
    recent = set()
    for relative in relative_paths:
        try:
            written = modified_at(fs.info(f"{root.rstrip('/')}/{relative}"))
        except FileNotFoundError:
            continue
        if written is None or written > now - delay_s:
            recent.add(relative)
    return recent
