"""The files, schema and properties of a Delta table version, read from its log with fsspec.

Restore checks that every file of a handle's version exists, and retention
keeps exactly the files of the versions still needed: both need the set of
physical files (data files and deletion-vector files) of given versions. This
module replays the Delta log without Spark:

* start from the newest complete classic checkpoint (``NNN.checkpoint.parquet``,
  single or multi-part) at or before the oldest version asked for, else from
  commit 0;
* apply every JSON commit after it in order; a live file is keyed, as in Delta,
  by its path and its deletion vector's unique id;
* record the live files, the schema and the table properties at each version asked for.

A missing commit file (the log no longer covers a version) or a version newer
than the table is :class:`~epochal.state.errors.SnapshotUnavailable`.
Deletion vectors stored by UUID (``storageType`` ``u``) live in
``[<prefix>/]deletion_vector_<uuid>.bin`` where the UUID is Z85-encoded in the
log (Delta's ``Base85Codec``).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import fsspec

from epochal.state.errors import SnapshotUnavailable
from epochal.state.delta.paths import inside, to_url

log = logging.getLogger(__name__)

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
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
    """Mutable replay state: live files by (path, deletion vector id), and the latest metaData."""

    table_url: str
    live: dict[tuple[str, str | None], LiveFile] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None

    def add(self, action: Mapping[str, Any]) -> None:
        path = self._path(action["path"])
        dv = action.get("deletionVector")
        stats = _stats(action)
        self.live[(path, _dv_id(dv))] = LiveFile(
            path, int(action.get("size") or 0), self._relative(dv_file(dv)), _live_records(stats, dv),
            stats.get("minValues") if stats else None,
        )

    def remove(self, action: Mapping[str, Any]) -> None:
        self.live.pop((self._path(action["path"]), _dv_id(action.get("deletionVector"))), None)

    def apply(self, actions: list[Mapping[str, Any]]) -> None:
        for action in actions:
            if action.get("metaData"):
                self.metadata = dict(action["metaData"])
        for action in actions:
            if action.get("remove"):
                self.remove(action["remove"])
        for action in actions:
            if action.get("add"):
                self.add(action["add"])

    def snapshot(self, version: int) -> VersionSnapshot:
        if self.metadata is None:
            raise SnapshotUnavailable(
                f"The Delta log of {self.table_url} has no table metadata at version {version}.",
                action="the table is damaged: restore from another checkpoint or savepoint.",
                path=self.table_url, version=version,
            )
        files = tuple(sorted(self.live.values(), key=lambda f: (f.path, f.dv_path or "")))
        config = _as_dict(self.metadata.get("configuration"))
        return VersionSnapshot(version, files, str(self.metadata.get("schemaString")), config)

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


def _stats(add: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parsed statistics of an ``add`` action (None when absent or unreadable)."""
    text = add.get("stats")
    if not text:
        return None
    try:
        stats = json.loads(text)
    except (TypeError, ValueError):
        return None
    return stats if isinstance(stats, dict) else None


def _live_records(stats: Mapping[str, Any] | None, dv: Mapping[str, Any] | None) -> int | None:
    """Rows a file holds that its deletion vector does not delete."""
    records = (stats or {}).get("numRecords")
    if records is None:
        return None
    return int(records) - int((dv or {}).get("cardinality") or 0)


def _as_dict(value: Any) -> dict[str, str]:
    """A map read from JSON (a dict) or from parquet by pyarrow (a list of pairs)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {str(k): str(v) for k, v in value}


class DeltaLog:
    """Read-only view of one Delta table's log (fsspec; no Spark)."""

    def __init__(self, table_url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = to_url(table_url)
        self._fs, root = fsspec.core.url_to_fs(self.url, **dict(storage_options or {}))
        self._root = root.rstrip("/")
        self._log = f"{self._root}/{LOG_DIR}"

    # -- listing ---------------------------------------------------------------------------

    def _log_names(self) -> list[str]:
        self._fs.invalidate_cache(self._log)  # object stores cache listings; the log grows under us
        try:
            return [posixpath.basename(str(p).rstrip("/")) for p in self._fs.ls(self._log, detail=False)]
        except FileNotFoundError:
            return []

    def _listing(self) -> tuple[set[int], dict[int, list[str]]]:
        """Commit versions, and complete classic checkpoints (version -> part files)."""
        commits: set[int] = set()
        parts: dict[int, dict[int, tuple[int, str]]] = {}
        for name in self._log_names():
            if m := _COMMIT.match(name):
                commits.add(int(m.group(1)))
            elif m := _CHECKPOINT.match(name):
                part, total = (int(m.group(2)), int(m.group(3))) if m.group(2) else (1, 1)
                parts.setdefault(int(m.group(1)), {})[part] = (total, name)
        checkpoints = {
            v: [byp[i][1] for i in sorted(byp)]
            for v, byp in parts.items()
            if {t for t, _ in byp.values()} == {len(byp)} and set(byp) == set(range(1, len(byp) + 1))
        }
        return commits, checkpoints

    def exists(self) -> bool:
        commits, checkpoints = self._listing()
        return bool(commits or checkpoints)

    def latest_version(self) -> int | None:
        commits, checkpoints = self._listing()
        return max(commits | set(checkpoints), default=None)

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
        """The snapshots of ``versions``, from one forward replay of the log."""
        wanted = sorted(set(versions))
        if not wanted:
            return {}
        commits, checkpoints = self._listing()
        latest = max(commits | set(checkpoints), default=None)
        if latest is None:
            raise self._unavailable(f"There is no Delta table at {self.url}.", wanted[0])
        if wanted[-1] > latest or wanted[0] < 0:
            bad = wanted[-1] if wanted[-1] > latest else wanted[0]
            raise self._unavailable(f"Version {bad} of {self.url} does not exist (its latest version is {latest}).", bad)
        for start, load in self._starts(commits, checkpoints, wanted[0], wanted[-1]):
            try:
                return self._replay_from(load(), start, wanted)
            except _CheckpointUnreadable as exc:
                log.warning("ignoring an unreadable Delta checkpoint of %s: %s", self.url, exc)
        missing = min(set(range(0, wanted[-1] + 1)) - commits, default=None)
        raise self._unavailable(
            f"The Delta log of {self.url} no longer covers version {wanted[0]}: commit {missing} is missing "
            "and no readable checkpoint precedes it.", wanted[0],
        )

    def _starts(
        self, commits: set[int], checkpoints: dict[int, list[str]], first: int, last: int
    ) -> Iterator[tuple[int, Callable[[], _Replay]]]:
        """Replay starting points (first commit to apply, initial state): checkpoints at or
        before ``first``, newest first, then commit 0."""
        for version in sorted((v for v in checkpoints if v <= first), reverse=True):
            if set(range(version + 1, last + 1)) <= commits:
                parts = [f"{self._log}/{n}" for n in checkpoints[version]]
                yield version + 1, lambda parts=parts: _CheckpointReplay(self.url, self._fs, parts)
        if set(range(0, last + 1)) <= commits:
            yield 0, lambda: _Replay(self.url)

    def _replay_from(self, replay: _Replay, start: int, wanted: list[int]) -> dict[int, VersionSnapshot]:
        out: dict[int, VersionSnapshot] = {}
        if start - 1 in wanted:
            out[start - 1] = replay.snapshot(start - 1)
        for version in range(start, wanted[-1] + 1):
            replay.apply(self._commit(version))
            if version in wanted:
                out[version] = replay.snapshot(version)
        return out

    def _commit(self, version: int) -> list[dict[str, Any]]:
        path = f"{self._log}/{version:020d}.json"
        try:
            text = self._fs.cat_file(path).decode("utf-8")
        except FileNotFoundError as exc:
            raise self._unavailable(f"Commit {version} of {self.url} is missing from its Delta log.", version) from exc
        return [json.loads(line) for line in text.splitlines() if line.strip()]

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


class _CheckpointUnreadable(Exception):
    pass


class _CheckpointReplay(_Replay):
    """A replay state loaded from a classic (single or multi-part) parquet checkpoint."""

    def __init__(self, table_url: str, fs: Any, parts: list[str]) -> None:
        super().__init__(table_url)
        try:
            for part in parts:
                self._load(fs, part)
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is skipped, the log replayed
            raise _CheckpointUnreadable(f"{parts}: {type(exc).__name__}: {exc}") from exc

    def _load(self, fs: Any, part: str) -> None:
        import pyarrow.parquet as pq

        with fs.open(part, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            columns = [c for c in ("add", "metaData") if c in parquet.schema_arrow.names]
            table = parquet.read(columns=columns)
        for row in table.to_pylist():
            if row.get("metaData"):
                self.metadata = row["metaData"]
            if row.get("add"):
                self.add(row["add"])


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
