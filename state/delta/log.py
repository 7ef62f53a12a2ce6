"""The files, schema and properties of a Delta table version, read from its log with fsspec.

Restore checks that every file of a handle's version exists, and retention
keeps exactly the files of the versions still needed: both need the set of
physical files (data files AND deletion-vector files) of given versions. This
module replays the Delta log without Spark, as Delta 4 writes it:

* list ``_delta_log`` once: JSON commits, checkpoints of every kind (classic,
  multi-part, and the UUID-named V2 checkpoints of ``delta.checkpointPolicy=v2``
  in JSON or parquet, whose file actions may sit in ``_delta_log/_sidecars/``;
  also the classic-named V2 compatibility checkpoint) and log compactions
  (``XXX.YYY.compacted.json``), see :mod:`~epochal.state.delta.checkpoints`;
* start from the newest readable checkpoint at or before the oldest version
  asked for (else commit 0), then apply the commits after it in order, starting
  afresh from a later checkpoint where that reads less; a compaction stands in
  for commits that are gone (log cleanup), never for ones still there;
* a live file is keyed, as in Delta, by its path and its deletion vector's unique id;
* record the live files (size, live rows: ``numRecords`` minus the deletion
  vector's cardinality), the schema and the table properties at each version asked for.

A version the remaining log files do not lead to (its commits cleaned up and no
checkpoint at or before it), or newer than the table, is
:class:`~epochal.state.errors.SnapshotUnavailable`. Deletion vectors stored by
UUID (``storageType`` ``u``) live in ``[<prefix>/]deletion_vector_<uuid>.bin``
where the UUID is Z85-encoded in the log (Delta's ``Base85Codec``).

Why our own replay: delta-rs (``deltalake``) reads these tables' metadata but
exposes no deletion-vector file paths (only materialised keep-masks), and
retention must know them; Delta's JVM snapshots know them but cost Spark jobs
per version. The tests check this replay against both.
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import fsspec

from epochal.state.delta.checkpoints import (
    LOG_DIR, Checkpoint, CheckpointUnreadable, LogGap, LogListing, Step, checkpoint_actions, json_actions,
    parse_listing, parsed_stats, plan_replay,
)
from epochal.state.delta.paths import inside, to_url
from epochal.state.delta.remembered import COMMITS_KEPT, REPLAYS, Remembered
from epochal.state.errors import SnapshotUnavailable

log = logging.getLogger(__name__)

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85)}
_ENCODED_UUID_LENGTH = 20


def decode_dv_uuid(encoded: str) -> uuid.UUID:
    """The UUID of a deletion vector file from its 20-character Z85 form in the log."""
    if len(encoded) != _ENCODED_UUID_LENGTH:
        raise ValueError(f"an encoded deletion-vector UUID has {_ENCODED_UUID_LENGTH} characters: {encoded!r}")
    raw = bytearray()
    for start in range(0, len(encoded), 5):
        number = 0
        for char in encoded[start:start + 5]:
            number = number * 85 + _Z85_INDEX[char]
        raw += number.to_bytes(4, "big")
    return uuid.UUID(bytes=bytes(raw))


def dv_file(descriptor: Mapping[str, Any] | None) -> str | None:
    """The file (table-relative path or URL) holding a deletion vector; None when inline or absent."""
    if not descriptor:
        return None
    kind, where = descriptor.get("storageType"), str(descriptor.get("pathOrInlineDv", ""))
    if kind == "u":
        prefix, encoded = where[:-_ENCODED_UUID_LENGTH], where[-_ENCODED_UUID_LENGTH:]
        name = f"deletion_vector_{decode_dv_uuid(encoded)}.bin"
        return posixpath.join(prefix, name) if prefix else name
    if kind == "p":
        return to_url(unquote(where))
    return None


def _dv_id(descriptor: Mapping[str, Any] | None) -> str | None:
    if not descriptor:
        return None
    offset = descriptor.get("offset")
    base = f"{descriptor.get('storageType')}{descriptor.get('pathOrInlineDv')}"
    return base if offset is None else f"{base}@{offset}"


@dataclass(frozen=True)
class LiveFile:
    """One data file live in a version, with its deletion vector's file if any."""

    path: str  # table-relative, or an absolute URL outside the table
    size: int
    dv_path: str | None = None
    #: Live rows (``numRecords`` of its stats minus the rows its deletion vector deletes); None without stats.
    records: int | None = field(default=None, compare=False)
    #: ``minValues`` of its statistics (column -> JSON value; timestamps as ISO text); None without stats.
    min_values: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    #: ``maxValues`` of its statistics, likewise.
    max_values: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    #: The ``add`` action as the log holds it (from a parquet checkpoint: maps as lists of pairs).
    action: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple[str, str | None]:
        """Delta's identity of a live file: its path and its deletion vector's unique id."""
        return self.path, _dv_id((self.action or {}).get("deletionVector"))

    @property
    def has_deletion_vector(self) -> bool:
        """True when a deletion vector (in its own file or inline in the log) removes rows of this file."""
        return self.dv_path is not None or self.key[1] is not None

    @property
    def physical(self) -> tuple[str, ...]:
        return (self.path,) if self.dv_path is None else (self.path, self.dv_path)


@dataclass(frozen=True)
class VersionSnapshot:
    """What one version of a Delta table is made of."""

    version: int
    files: tuple[LiveFile, ...]
    schema_json: str
    configuration: Mapping[str, str] = field(hash=False)
    #: The ``metaData`` and ``protocol`` actions in force (as the log holds them).
    metadata: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    protocol: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def physical_files(self) -> frozenset[str]:
        """Data and deletion-vector files, table-relative (or absolute URLs when outside the table)."""
        return frozenset(p for f in self.files for p in f.physical)

    @property
    def bytes_total(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def rows(self) -> int | None:
        """Live rows, from the files' statistics (None when a file has none)."""
        counts = [f.records for f in self.files]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[arg-type]

    @property
    def schema(self):
        from pyspark.sql import types as T

        return T.StructType.fromJson(json.loads(self.schema_json))


@dataclass
class _Replay:
    """Mutable replay state: live files by (path, deletion vector id), and the latest metaData and protocol."""

    table_url: str
    live: dict[tuple[str, str | None], LiveFile] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None

    def add(self, action: Mapping[str, Any]) -> None:
        path = self._path(action["path"])
        dv = action.get("deletionVector")
        stats = parsed_stats(action)
        self.live[(path, _dv_id(dv))] = LiveFile(
            path, int(action.get("size") or 0), self._relative(dv_file(dv)), _live_records(stats, dv),
            stats.get("minValues") if stats else None, stats.get("maxValues") if stats else None, action,
        )

    def remove(self, action: Mapping[str, Any]) -> None:
        self.live.pop((self._path(action["path"]), _dv_id(action.get("deletionVector"))), None)

    def apply(self, actions: list[Mapping[str, Any]]) -> None:
        for action in actions:
            if action.get("metaData"):
                self.metadata = dict(action["metaData"])
            if action.get("protocol"):
                self.protocol = dict(action["protocol"])
        for action in actions:
            if action.get("remove"):
                self.remove(action["remove"])
        for action in actions:
            if action.get("add"):
                self.add(action["add"])

    def copy(self) -> _Replay:
        """A replay to go on from without changing this one (the live files are immutable)."""
        return _Replay(self.table_url, dict(self.live), self.metadata, self.protocol)

    def snapshot(self, version: int) -> VersionSnapshot:
        if self.metadata is None:
            raise SnapshotUnavailable(
                f"The Delta log of {self.table_url} has no table metadata at version {version}.",
                action="the table is damaged: restore from another checkpoint or savepoint.",
                path=self.table_url, version=version,
            )
        files = tuple(sorted(self.live.values(), key=lambda f: (f.path, f.dv_path or "")))
        config = as_map(self.metadata.get("configuration"))
        return VersionSnapshot(version, files, str(self.metadata.get("schemaString")), config, self.metadata, self.protocol)

    def _path(self, raw: str) -> str:
        decoded = unquote(raw)
        if "://" not in decoded and not decoded.startswith("/"):
            return decoded
        return self._relative(to_url(decoded)) or decoded

    def _relative(self, path: str | None) -> str | None:
        if path is None or "://" not in path:
            return path
        if inside(path, self.table_url):
            return path[len(self.table_url.rstrip("/")) + 1:]
        return path


def _live_records(stats: Mapping[str, Any] | None, dv: Mapping[str, Any] | None) -> int | None:
    """Rows a file holds that its deletion vector does not delete."""
    records = (stats or {}).get("numRecords")
    if records is None:
        return None
    return int(records) - int((dv or {}).get("cardinality") or 0)


def as_map(value: Any) -> dict[str, str | None]:
    """A map of the log read from JSON (a dict) or from parquet by pyarrow (a list of pairs); a null value stays
    null (a partition value may be)."""
    pairs = value.items() if isinstance(value, Mapping) else (value or ())
    return {str(k): None if v is None else str(v) for k, v in pairs}


class DeltaLog:
    """Read-only view of one Delta table's log (fsspec; no Spark)."""

    def __init__(self, table_url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = to_url(table_url)
        self._fs, root = fsspec.core.url_to_fs(self.url, **dict(storage_options or {}))
        self._root = root.rstrip("/")
        self._log = f"{self._root}/{LOG_DIR}"

    @property
    def fs(self) -> Any:
        return self._fs

    @property
    def root(self) -> str:
        return self._root

    # -- listing ---------------------------------------------------------------------------

    def _listing(self) -> LogListing:
        """The commits, checkpoints and compactions in ``_delta_log`` (one listing)."""
        self._fs.invalidate_cache(self._log)  # object stores cache listings; the log grows under us
        try:
            names = self._fs.ls(self._log, detail=False)
        except FileNotFoundError:
            return LogListing()
        return parse_listing(posixpath.basename(str(name).rstrip("/")) for name in names)

    def exists(self) -> bool:
        return self._listing().latest is not None

    def latest_version(self) -> int | None:
        return self._listing().latest

    def operation_metrics(self, version: int) -> dict[str, str]:
        """The ``operationMetrics`` of one commit's ``commitInfo`` (empty when it has none)."""
        for action in self._commit(version):
            if "commitInfo" in action:
                return dict(action["commitInfo"].get("operationMetrics") or {})
        return {}

    # -- snapshots -------------------------------------------------------------------------

    def snapshot(self, version: int) -> VersionSnapshot:
        return self.snapshots([version])[version]

    def snapshots(self, versions: Iterable[int]) -> dict[int, VersionSnapshot]:
        """The snapshots of ``versions``, from one forward replay of the log (see :func:`plan_replay`)."""
        wanted = sorted(set(versions))
        if not wanted:
            return {}
        listing = self._listing()
        self._check_range(listing, wanted)
        known = self._remembered(listing)
        if known is not None and known.version <= wanted[0] and all(
                v in listing.commits for v in range(known.version, wanted[-1] + 1)):
            return self._go_on(known, wanted)
        unreadable: set[int] = set()
        while True:
            try:
                return self._run(listing, plan_replay(listing, wanted, unreadable), set(wanted), known)
            except LogGap as gap:
                raise self._unavailable(self._gap_message(listing, gap.version, unreadable), gap.version) from None
            except CheckpointUnreadable as exc:
                log.warning("ignoring an unreadable Delta checkpoint of %s: %s", self.url, exc)
                unreadable.add(exc.version)

    def _check_range(self, listing: LogListing, wanted: list[int]) -> None:
        latest = listing.latest
        if latest is None:
            raise self._unavailable(f"There is no Delta table at {self.url}.", wanted[0])
        if wanted[-1] > latest or wanted[0] < 0:
            bad = wanted[-1] if wanted[-1] > latest else wanted[0]
            message = f"Version {bad} of {self.url} does not exist (its latest version is {latest})."
            raise self._unavailable(message, bad)

    def _gap_message(self, listing: LogListing, version: int, unreadable: set[int]) -> str:
        base = max((v for v in listing.checkpoints if v <= version and v not in unreadable), default=-1)
        missing = next((v for v in range(base + 1, version + 1) if v not in listing.commits), None)
        why = f"commit {missing} is missing" if missing is not None else "its log files do not lead to it"
        return (f"The Delta log of {self.url} no longer covers version {version}: {why} "
                "and no readable checkpoint precedes it.")

    def _run(
        self, listing: LogListing, steps: list[Step], wanted: set[int], known: Remembered | None,
    ) -> dict[int, VersionSnapshot]:
        commits = dict(known.commits) if known is not None else {}
        replay, out, text = _Replay(self.url), {}, None
        for step in steps:
            text = None
            if step.kind == "checkpoint":
                replay = self._checkpoint(listing.checkpoints[step.version])
            elif step.compaction is not None:
                replay.apply(self._json(step.compaction.name, step.version))
            elif step.version in commits:
                replay.apply(commits[step.version])
            else:
                text = self._commit_text(step.version)
                replay.apply(commits.setdefault(step.version, json_actions(text)))
            if step.version in wanted:
                out[step.version] = replay.snapshot(step.version)
        last = steps[-1].version if steps else None
        if last is not None and (known is None or last > known.version):
            text = self._commit_text(last) if text is None and last in listing.commits else text
            if text is not None:
                self._remember(last, text, replay, commits)
        return out

    def _remembered(self, listing: LogListing) -> Remembered | None:
        """This process's last read of the table, if the table is still the one it read (else forgotten)."""
        known = REPLAYS.get(self.url)
        if known is None:
            return None
        try:
            same = known.version in listing.commits and self._commit_text(known.version) == known.text
        except SnapshotUnavailable:
            same = False
        if not same:
            REPLAYS.drop(self.url)
            return None
        return known

    def _go_on(self, known: Remembered, wanted: list[int]) -> dict[int, VersionSnapshot]:
        """The snapshots of ``wanted`` (none older than ``known``), reading only the commits after it."""
        replay, out, text, commits = known.replay.copy(), {}, known.text, dict(known.commits)
        if known.version in wanted:
            out[known.version] = replay.snapshot(known.version)
        for version in range(known.version + 1, wanted[-1] + 1):
            text = self._commit_text(version)
            replay.apply(commits.setdefault(version, json_actions(text)))
            if version in wanted:
                out[version] = replay.snapshot(version)
        if wanted[-1] > known.version:
            self._remember(wanted[-1], text, replay, commits)
        return out

    def _remember(self, version: int, text: str, replay: _Replay, commits: dict[int, list[dict[str, Any]]]) -> None:
        kept = {v: actions for v, actions in commits.items() if version - COMMITS_KEPT < v <= version}
        REPLAYS.put(self.url, Remembered(version, text, replay, kept))  # the caller is done with ``replay``

    def _checkpoint(self, options: list[Checkpoint]) -> _Replay:
        """The state a checkpoint holds, from the first of ``options`` (one version's checkpoints) that reads."""
        reasons = []
        for checkpoint in options:
            try:
                replay = _Replay(self.url)
                replay.apply(checkpoint_actions(self._fs, self._log, checkpoint))
                if replay.metadata is None:
                    raise ValueError("it holds no metaData action")
                return replay
            except Exception as exc:  # noqa: BLE001 - an unreadable checkpoint gives way to another start
                reasons.append(f"{', '.join(checkpoint.files)}: {type(exc).__name__}: {exc}")
        raise CheckpointUnreadable(options[0].version, "; ".join(reasons))

    def _commit(self, version: int) -> list[dict[str, Any]]:
        return json_actions(self._commit_text(version))

    def _commit_text(self, version: int) -> str:
        return self._text(f"{version:020d}.json", version)

    def _json(self, name: str, version: int) -> list[dict[str, Any]]:
        """The actions of a commit or compaction file."""
        return json_actions(self._text(name, version))

    def _text(self, name: str, version: int) -> str:
        try:
            return self._fs.cat_file(f"{self._log}/{name}").decode("utf-8")
        except FileNotFoundError as exc:
            raise self._unavailable(f"The log file {name} of {self.url} is missing.", version) from exc

    def _unavailable(self, message: str, version: int) -> SnapshotUnavailable:
        return SnapshotUnavailable(
            message, action="restore from another checkpoint or savepoint.", path=self.url, version=version
        )

    # -- files on disk ---------------------------------------------------------------------

    def files_on_disk(self) -> dict[str, list[str]]:
        """Every file of the table outside ``_``-folders (the log), by table-relative path.

        Each entry lists the physical files that belong to that path: the file
        itself when present and its Hadoop ``.<name>.crc`` checksum sibling.
        """
        groups: dict[str, list[str]] = {}
        for full in self._fs.find(self._root, withdirs=False):
            rel = str(full)[len(self._root) + 1:]
            if not rel or rel.split("/", 1)[0].startswith("_"):
                continue
            folder, name = posixpath.split(rel)
            if name.startswith(".") and name.endswith(".crc"):
                owner = posixpath.join(folder, name[1:-len(".crc")])
            elif name.startswith("."):
                continue
            else:
                owner = rel
            groups.setdefault(owner, []).append(rel)
        return groups

    def missing_files(self, snapshot: VersionSnapshot) -> list[str]:
        """Files of ``snapshot`` that are not on storage (sorted)."""
        present = self.files_on_disk()
        missing = []
        for path in sorted(snapshot.physical_files):
            if "://" in path:
                fs, other = fsspec.core.url_to_fs(path)
                if not fs.exists(other):
                    missing.append(path)
            elif path not in present.get(path, ()):
                missing.append(path)
        return missing

    def physical_url(self, relative: str) -> str:
        return f"{self.url}/{relative}"


def working_tables(root_url: str, storage_options: Mapping[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """The Delta tables at ``<root>/<stage>/<state>``: (stage, state, table URL), sorted."""
    root = to_url(root_url)
    fs, base = fsspec.core.url_to_fs(root, **dict(storage_options or {}))
    found = []
    for stage in _subfolders(fs, base):
        for state in _subfolders(fs, f"{base.rstrip('/')}/{stage}"):
            url = f"{root}/{stage}/{state}"
            if DeltaLog(url, storage_options).exists():
                found.append((stage, state, url))
    return sorted(found)


def _subfolders(fs: Any, path: str) -> list[str]:
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return []
    names = (posixpath.basename(str(e["name"]).rstrip("/")) for e in entries if e.get("type") == "directory")
    return sorted(n for n in names if not n.startswith((".", "_")))
