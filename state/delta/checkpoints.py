"""The Delta log's files besides commits: checkpoints of every kind, their sidecars, log compactions.

Names in ``_delta_log`` (Delta 4's ``FileNames``, the protocol's "Checkpoints" and
"Log Compaction Files"):

* ``NNN.checkpoint.parquet``: a classic checkpoint. V1 spec (every action inline), or, on
  tables with the ``v2Checkpoint`` feature, V2 spec: the compatibility checkpoint Delta writes
  before its log cleanup deletes older files, a copy of the UUID-named one that points at the
  same sidecars;
* ``NNN.checkpoint.PPPPPPPPPP.QQQQQQQQQQ.parquet``: part P of a multi-part (V1 spec) checkpoint,
  usable only with all Q parts;
* ``NNN.checkpoint.<uuid>.json`` or ``.parquet``: a UUID-named (V2 spec) checkpoint: one
  ``checkpointMetadata`` action, the non-file actions, and either the file actions inline or
  ``sidecar`` actions naming parquet files in ``_delta_log/_sidecars/`` that hold them;
* ``XXX.YYY.compacted.json``: a log compaction, the reconciled actions of commits XXX to YYY.

Of several checkpoints of one version, UUID-named ones are preferred, then multi-part, then
classic (Delta's order); an unreadable one (empty or truncated, a sidecar gone) gives way to the
next, then to older checkpoints (Delta ignores empty checkpoint files; listing sizes would cost
a stat per file on local disks, so they are found when read).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import unquote

LOG_DIR = "_delta_log"
SIDECAR_DIR = "_sidecars"
_COMMIT = re.compile(r"^(\d+)\.json$")
_CLASSIC = re.compile(r"^(\d+)\.checkpoint\.parquet$")
_MULTI_PART = re.compile(r"^(\d+)\.checkpoint\.(\d+)\.(\d+)\.parquet$")
_UUID_NAMED = re.compile(r"^(\d+)\.checkpoint\.([^.]+)\.(json|parquet)$")
_COMPACTED = re.compile(r"^(\d+)\.(\d+)\.compacted\.json$")
# What a replay needs of an ``add`` action (parquet columns are read by these leaf paths only): what it
# keeps, and the rest of the action, which a RESTORE commit written from the log copies (state/delta/restore.py).
_ADD_FIELDS = (
    "path", "size", "deletionVector", "stats", "partitionValues", "modificationTime", "dataChange", "tags",
    "baseRowId", "defaultRowCommitVersion", "clusteringProvider",
)


class CheckpointUnreadable(Exception):
    """No checkpoint of ``version`` could be read; the replay starts elsewhere."""

    def __init__(self, version: int, reason: str) -> None:
        super().__init__(f"checkpoint {version}: {reason}")
        self.version = version


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint of a version: its top-level files in ``_delta_log``."""

    version: int
    kind: str  # "uuid" (V2 spec), "multi-part" or "classic" (V1 spec, or V2 spec on v2Checkpoint tables)
    files: tuple[str, ...]


@dataclass(frozen=True)
class Compaction:
    """A log compaction file: the reconciled actions of commits ``start`` to ``end``."""

    start: int
    end: int
    name: str


@dataclass
class LogListing:
    """What ``_delta_log`` holds: commit versions, checkpoints by version (preferred first), compactions."""

    commits: set[int] = field(default_factory=set)
    checkpoints: dict[int, list[Checkpoint]] = field(default_factory=dict)
    compactions: list[Compaction] = field(default_factory=list)

    @property
    def latest(self) -> int | None:
        ends = {c.end for c in self.compactions}
        return max(self.commits | set(self.checkpoints) | ends, default=None)


def parse_listing(names: Iterable[str]) -> LogListing:
    """The listing of ``_delta_log`` from the names in it."""
    listing, parts = LogListing(), {}
    for name in names:
        if m := _COMMIT.match(name):
            listing.commits.add(int(m.group(1)))
        elif m := _COMPACTED.match(name):
            if int(m.group(2)) > int(m.group(1)):
                listing.compactions.append(Compaction(int(m.group(1)), int(m.group(2)), name))
        elif m := _MULTI_PART.match(name):
            parts.setdefault((int(m.group(1)), int(m.group(3))), {})[int(m.group(2))] = name
        elif m := _CLASSIC.match(name) or _UUID_NAMED.match(name):
            kind = "classic" if m.re is _CLASSIC else "uuid"
            listing.checkpoints.setdefault(int(m.group(1)), []).append(Checkpoint(int(m.group(1)), kind, (name,)))
    for checkpoint in _complete_multi_part(parts):
        listing.checkpoints.setdefault(checkpoint.version, []).append(checkpoint)
    for options in listing.checkpoints.values():
        options.sort(key=_preference)
    return listing


def _complete_multi_part(parts: Mapping[tuple[int, int], Mapping[int, str]]) -> Iterator[Checkpoint]:
    """The multi-part checkpoints with every part present ((version, parts) -> part number -> name)."""
    for (version, total), found in parts.items():
        if set(found) == set(range(1, total + 1)):
            yield Checkpoint(version, "multi-part", tuple(found[i] for i in sorted(found)))


def _preference(checkpoint: Checkpoint) -> tuple[int, int, str]:
    rank = {"uuid": 0, "multi-part": 1, "classic": 2}[checkpoint.kind]
    return rank, -len(checkpoint.files), checkpoint.files[0]


# ------------------------------------------------------------------------------ reading


def checkpoint_actions(fs: Any, log_dir: str, checkpoint: Checkpoint) -> list[dict[str, Any]]:
    """The ``add``, ``metaData`` and ``protocol`` actions of a checkpoint: its top-level files, then its sidecars."""
    actions, sidecars, has_metadata = [], [], False
    for name in checkpoint.files:
        for action in _top_level_actions(fs, f"{log_dir}/{name}"):
            if "sidecar" in action:
                sidecars.append(action["sidecar"])
            has_metadata = has_metadata or "checkpointMetadata" in action
            actions.append(action)
    if checkpoint.kind == "uuid" and not has_metadata:
        raise ValueError(f"{checkpoint.files[0]} has no checkpointMetadata action")
    for sidecar in sidecars:
        actions += _parquet_actions(fs, sidecar_path(log_dir, str(sidecar["path"])), ("add",))
    return actions


def sidecar_path(log_dir: str, path: str) -> str:
    """Where a ``sidecar`` action's file is: a name (or relative path) under ``_sidecars``, else absolute."""
    decoded = unquote(path)
    return decoded if "://" in decoded or decoded.startswith("/") else f"{log_dir}/{SIDECAR_DIR}/{decoded}"


def json_lines(text: str) -> list[str]:
    """The non-blank lines of a JSON-lines text, split on ``\n`` only: ``str.splitlines`` also splits on
    U+0085, U+2028 and U+2029, which JSON leaves unescaped inside strings (a column's min/max statistics in
    a Delta commit: one such character in a row broke every later read of the table's log)."""
    return [line for line in text.split("\n") if line.strip()]


def json_actions(text: str) -> list[dict[str, Any]]:
    """The actions of a JSON log file (a commit, a compaction or a JSON checkpoint): one per line."""
    return [json.loads(line) for line in json_lines(text)]


def _top_level_actions(fs: Any, path: str) -> list[dict[str, Any]]:
    if path.endswith(".json"):
        return json_actions(fs.cat_file(path).decode("utf-8"))
    return _parquet_actions(fs, path, ("add", "metaData", "protocol", "sidecar", "checkpointMetadata"))


def _parquet_actions(fs: Any, path: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The non-null actions of ``columns`` in a parquet log file (``add`` reduced to what a replay needs)."""
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle, pre_buffer=False)  # no background reader threads (apache/arrow#34314)
        table = parquet.read(columns=list(_leaf_columns(parquet.schema_arrow, columns)), use_threads=False)
    return [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist() if any(row.values())]


def _leaf_columns(schema: Any, columns: tuple[str, ...]) -> Iterator[str]:
    for column in (c for c in columns if c in schema.names):
        if column != "add":
            yield column
            continue
        present = {f.name for f in schema.field("add").type}
        stats = () if "stats" in present else ("stats_parsed",)  # stats as a struct only: read that
        yield from (f"add.{name}" for name in (*_ADD_FIELDS, *stats) if name in present)


def parsed_stats(add: Mapping[str, Any]) -> dict[str, Any] | None:
    """An ``add``'s statistics: its JSON ``stats``, else its ``stats_parsed`` struct (dates as ISO text)."""
    text = add.get("stats")
    if text:
        try:
            stats = json.loads(text)
        except (TypeError, ValueError):
            return None
        return stats if isinstance(stats, dict) else None
    parsed = add.get("stats_parsed")
    if not isinstance(parsed, Mapping):
        return None
    return {"numRecords": parsed.get("numRecords"), "minValues": _json_values(parsed.get("minValues")),
            "maxValues": _json_values(parsed.get("maxValues"))}


def _json_values(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """``minValues``/``maxValues`` of ``stats_parsed`` as JSON ``stats`` has them (dates and timestamps as ISO text)."""
    return {k: v.isoformat() if isinstance(v, date) else v for k, v in (values or {}).items()}


# ------------------------------------------------------------------------------ planning

#: A checkpoint read costs about as much as this many commit reads (a parquet file or two, vs small JSON files).
CHECKPOINT_COST = 10


class LogGap(Exception):
    """The log's files no longer lead to ``version``."""

    def __init__(self, version: int) -> None:
        super().__init__(f"no log files lead to version {version}")
        self.version = version


@dataclass(frozen=True)
class Step:
    """One read of a replay, after which the table is at ``version``."""

    version: int
    kind: str  # "checkpoint" (a fresh start), "commit" or "compaction"
    compaction: Compaction | None = None


def plan_replay(listing: LogListing, wanted: list[int], unreadable: Iterable[int] = ()) -> list[Step]:
    """The cheapest reads that reach every version of ``wanted`` (sorted, existing) in order.

    The replay starts from the newest readable checkpoint at or before the first wanted version
    (else commit 0), and may start afresh from a later checkpoint when that is cheaper than the
    commits up to it. A compaction costs one more than the commits it stands for: it only
    bridges commits that are gone (the commits are the source of truth). Raises :class:`LogGap`.
    """
    skip = set(unreadable)
    usable = [v for v in listing.checkpoints if v <= wanted[0] and v not in skip]
    if usable:
        try:
            return _plan_from(listing, wanted, skip, max(usable))
        except LogGap:
            pass  # a compaction reaching back over that checkpoint may bridge the gap: try from commit 0
    return _plan_from(listing, wanted, skip, -1)


# The cheapest way found to a version: (cost, the read that reaches it, the version that read starts from).
_Way = tuple[int, "Step | None", "int | None"]


def _plan_from(listing: LogListing, wanted: list[int], skip: set[int], start: int) -> list[Step]:
    """Cheapest paths over versions (a DAG: every read moves forward), through every wanted version."""
    first = Step(start, "checkpoint") if start >= 0 else None
    best: dict[int, _Way] = {start: (CHECKPOINT_COST if first else 0, first, None)}
    by_end: dict[int, list[Compaction]] = {}
    for compaction in listing.compactions:
        by_end.setdefault(compaction.end, []).append(compaction)
    targets, anchor = set(wanted), start  # anchor: the last wanted version reached (a fresh start begins there)
    for version in range(start + 1, wanted[-1] + 1):
        options = _ways_to(version, listing, best, by_end.get(version, ()), anchor, skip)
        if options:
            best[version] = min(options, key=lambda option: option[0])
        if version in targets:
            if version not in best:
                raise LogGap(version)
            anchor = version
    return _path(best, wanted[-1])


def _ways_to(
    version: int, listing: LogListing, best: Mapping[int, _Way], compactions: Iterable[Compaction],
    anchor: int, skip: set[int],
) -> list[_Way]:
    """The reads that reach ``version``: its commit, a compaction ending there, its checkpoint."""
    ways: list[_Way] = []
    if version in listing.commits and version - 1 in best:
        ways.append((best[version - 1][0] + 1, Step(version, "commit"), version - 1))
    for c in compactions:
        before = c.start - 1
        if before in best and before >= anchor:  # no wanted version inside the compaction
            ways.append((best[before][0] + version - before + 1, Step(version, "compaction", c), before))
    if version in listing.checkpoints and version not in skip:
        ways.append((best[anchor][0] + CHECKPOINT_COST, Step(version, "checkpoint"), anchor))
    return ways


def _path(best: Mapping[int, _Way], last: int) -> list[Step]:
    steps: list[Step] = []
    node: int | None = last
    while node is not None and (step := best[node][1]) is not None:
        steps.append(step)
        node = best[node][2]
    return steps[::-1]
