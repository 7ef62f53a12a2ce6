"""Sources that fix their input range for an epoch before reading (replayable input).

A source ``plan``s an epoch: it lists exactly what the epoch will read and the
runner records that plan durably before anything is read, so that a replay of
the epoch (after a crash or a restore) reads the same input even if more files
have landed since. A backfill re-plans on purpose.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import fsspec

from epochal.pipeline.errors import InputChangedError, SourceNotFoundError, UnreadFilesError
from epochal.pipeline.stage import EpochInfo

log = logging.getLogger("epochal.sources")

#: Hadoop's glob characters: Spark reads a path holding one as a pattern (``part[1].jsonl`` reads ``part1.jsonl``).
#: A file name holding one, or a ``:`` (read as a URI scheme: "Relative path in absolute URI"), is refused.
GLOB_CHARACTERS = "*?[]{}\\"


@dataclass(frozen=True)
class SourceBatch:
    """What a source hands to the stages for one epoch: its planned input."""

    name: str
    partition: str
    files: tuple[str, ...]
    position: dict[str, Any] = field(default_factory=dict)


class Source(Protocol):
    """An epoch's input. A source may also have ``input_bytes(info) -> int | None``: the bytes the epoch would
    read, asked before the run starts Spark, with no plan recorded (``spark.jit: auto``, see
    :func:`run_input_bytes`); a source without it leaves the run's input unknown. And it may have ``check()``,
    called before a run starts Spark: raise if the source's input cannot be found at all (a folder that
    does not exist), rather than plan empty epochs."""

    name: str

    def plan(self, info: EpochInfo) -> SourceBatch:
        """Fix the epoch's input range (called once, before reading; the runner records it)."""
        ...


@dataclass(frozen=True)
class HourlyFolderSource:
    """Files under ``<landing>/dt=YYYY-MM-DD/hour=HH/`` of the epoch's window whose name matches ``pattern``.

    An hour folder holding files but none that match (``part-0.json`` for ``*.jsonl``) fails the plan, naming them:
    the epoch would be empty and done, and those files never read. Files that do not match beside files that do
    are not read, and a warning names them. A file directly in a day folder of the window (in no hour folder), a
    folder there holding files but not named ``hour=HH``, 00 to 23 (``hour=4``, ``hour=24``, ``tmp``), a folder in an
    hour folder whose name matches ``pattern``, or a file to read whose name holds a glob character
    (``*?[]{}\\``) or a ``:`` (Spark would read it as a pattern or a URI, not as named), fails the plan too,
    naming it."""

    name: str
    landing: str
    #: The file names read (``fnmatch``, case-sensitive): ``"*.csv"``, ``"*"``...
    pattern: str = "*.jsonl"

    def plan(self, info: EpochInfo) -> SourceBatch:
        from epochal.pipeline.examples.clickstream.layout import day_folder_strays, partition_listing

        found, ignored, folders = partition_listing(self.landing, info.partition, self.pattern)
        files = tuple(found)
        self._refuse_strays(info.partition, *day_folder_strays(self.landing, info.partition), folders)
        self._refuse_unread(info.partition, files, ignored)
        if ignored:
            log.warning("source %r, partition %s: %d file(s) not matching %r are not read: %s", self.name,
                        info.partition, len(ignored), self.pattern, ", ".join(ignored[:5]))
        if not files:
            self.check()
        return SourceBatch(
            name=self.name,
            partition=info.partition,
            files=files,
            position={"partition": info.partition, "epoch": info.epoch, "files": list(files)},
        )

    def _refuse_strays(self, partition: str, loose: list[str], misnamed: list[tuple[str, str]],
                       folders: list[str]) -> None:
        """Raise :class:`UnreadFilesError` if the epoch's day folders hold files outside any hour folder: directly,
        or in a folder not named ``hour=HH`` (00 to 23); or if an hour folder holds a folder matching the pattern."""
        where = f"source {self.name!r}, partition {partition}"
        if loose:
            raise UnreadFilesError(
                f"{where}: {len(loose)} file(s) directly in the day folder, in no hour folder, which no partition "
                f"reads: {_some(loose)}",
                action="move them into the day folder's hour folder hour=HH of the UTC hour they belong to",
                source=self.name, partition=partition, files=loose,
            )
        if misnamed:
            raise UnreadFilesError(
                f"{where}: {len(misnamed)} folder(s) holding files in the day folder, not hour folders, whose files "
                f"no partition reads: {_some([f'{path} ({why})' for path, why in misnamed])}",
                action="rename or move them as said: an hour folder is named hour=HH, 00 to 23, its files' UTC hour",
                source=self.name, partition=partition, files=[path for path, _ in misnamed],
            )
        if folders:
            raise UnreadFilesError(
                f"{where}: {len(folders)} folder(s) in an hour folder whose name matches {self.pattern!r}, which "
                f"would be read as files: {_some(folders)}",
                action="move the files they hold into the hour folder, or rename them",
                source=self.name, partition=partition, files=folders,
            )

    def _refuse_unread(self, partition: str, files: Sequence[str], ignored: list[str]) -> None:
        """Raise :class:`UnreadFilesError` if the epoch would be done without some of its files: files none of
        which match the pattern; names Spark reads as a pattern."""
        where = f"source {self.name!r}, partition {partition}"
        if ignored and not files:
            raise UnreadFilesError(
                f"{where}: {len(ignored)} file(s) that do not match {self.pattern!r} and none that do, "
                f"e.g. {ignored[0]}",
                action="give HourlyFolderSource the pattern of these files (pattern=), or move them",
                source=self.name, partition=partition, files=ignored,
            )
        undecodable = [f.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for f in files if not _utf8(f)]
        if undecodable:  # the JVM cannot be given the name (Python holds its bytes as surrogates)
            raise UnreadFilesError(
                f"{where}: {len(undecodable)} file(s) whose name is not valid UTF-8 (shown with U+FFFD for each "
                f"bad byte), which Spark cannot be given: {_some(undecodable)}",
                action="rename them with UTF-8 names", source=self.name, partition=partition, files=undecodable,
            )
        unsafe = [f for f in files if set(GLOB_CHARACTERS + ":").intersection(f.rstrip("/").rsplit("/", 1)[-1])]
        if unsafe:
            raise UnreadFilesError(
                f"{where}: {len(unsafe)} file(s) whose name holds a glob character ({GLOB_CHARACTERS}) or a ':', "
                f"which Spark would not read as named: {_some(unsafe)}",
                action="rename them: Spark reads a path as a glob pattern (and a ':' as a URI scheme)",
                source=self.name, partition=partition, files=unsafe,
            )

    def check(self) -> None:
        """Raise :class:`SourceNotFoundError` if the landing folder does not exist. An hour without files is an
        empty epoch, but a landing folder that does not exist is a mistake in the configuration: epochs planned
        from it would be empty and done, and their data never read."""
        fs, root = fsspec.core.url_to_fs(self.landing)
        if not fs.exists(root):
            raise SourceNotFoundError(
                f"source {self.name!r}: the landing folder {self.landing} does not exist",
                action="fix `landing:` in the configuration, or create the folder (an empty one is fine)",
                source=self.name, path=self.landing,
            )

    def input_bytes(self, info: EpochInfo) -> int | None:
        """The bytes of the partition's files as they are now (None when one is gone while listed)."""
        from epochal.pipeline.examples.clickstream.layout import partition_listing

        files = partition_listing(self.landing, info.partition, self.pattern)[0]  # a listing: no plan, no state
        sizes = [(fingerprint(f) or {}).get("size") for f in files]
        return None if None in sizes else sum(int(s) for s in sizes)


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _some(paths: Sequence[str], shown: int = 5) -> str:
    """Up to ``shown`` paths, comma-separated, and how many more."""
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f" and {more} more" if more > 0 else "")


def run_input_bytes(sources: Sequence[Any], infos: Sequence[EpochInfo]) -> int | None:
    """The bytes every source would read over ``infos``, or None when a source cannot say (no ``input_bytes``)."""
    total = 0
    for source in sources:
        size = getattr(source, "input_bytes", None)
        if size is None:
            return None
        for info in infos:
            found = size(info)
            if found is None:
                return None
            total += found
    return total


# The recorded plan is the source's position plus these keys of epochal's own: the batch's partition and files
# (a source's position need not hold them) and each planned file's fingerprint.
_BATCH, _FINGERPRINTS = "epochal_batch", "fingerprints"


def _planned(recorded: dict[str, Any]) -> dict[str, Any]:
    """The batch's partition and files as recorded. A plan recorded before 2026-12-06 holds them only where the
    source's position did (``HourlyFolderSource``'s does); otherwise its files are the ones it fingerprinted (each
    planned file was, by name: in sorted order, which the JSON kept)."""
    if _BATCH in recorded:
        return recorded[_BATCH]
    planned = {k: recorded[k] for k in ("partition", "files") if k in recorded}
    if "files" not in planned and recorded.get(_FINGERPRINTS):
        planned["files"] = list(recorded[_FINGERPRINTS])
    return planned


def batch_from_position(name: str, recorded: dict[str, Any], partition: str | None = None) -> SourceBatch:
    """Rebuild a recorded plan: the batch the source planned, its position as the source gave it (``partition``,
    the epoch's key, where an older plan did not record the batch's)."""
    planned = _planned(recorded)
    position = {k: v for k, v in recorded.items() if k not in (_BATCH, _FINGERPRINTS)}
    return SourceBatch(name=name, partition=planned.get("partition", partition), files=tuple(planned.get("files", [])),
                       position=position)


def fingerprint(path: str) -> dict[str, Any] | None:
    """What identifies one input file's content: its size and its ETag (object stores) or modification time;
    ``None`` when the file is gone."""
    fs, stripped = fsspec.core.url_to_fs(path)
    try:
        info = fs.info(stripped)
    except FileNotFoundError:
        return None
    found: dict[str, Any] = {"size": info.get("size")}
    etag = info.get("ETag") or info.get("etag")
    if etag:
        found["etag"] = str(etag).strip('"')
    else:
        modified = info.get("mtime", info.get("LastModified", info.get("last_modified")))
        found["mtime"] = modified.timestamp() if hasattr(modified, "timestamp") else modified
    return found


def record_fingerprints(batch: SourceBatch) -> dict[str, Any]:
    """The plan to record: the source's position plus, per planned file, its :func:`fingerprint`."""
    return {**batch.position, _BATCH: {"partition": batch.partition, "files": list(batch.files)},
            _FINGERPRINTS: {f: fingerprint(f) for f in batch.files}}


def refuse_missing(batch: SourceBatch, recorded: dict[str, Any]) -> None:
    """Raise :class:`UnreadFilesError` if a file the batch lists cannot be found (a link to nothing, a file deleted
    while the source listed it; a pattern a source of one's own lists is Spark's to expand). Before the plan is
    recorded, so that once it is mended the next run plans anew, instead of replaying a plan that fails each time."""
    gone = [f for f in batch.files if recorded[_FINGERPRINTS].get(f) is None and not set(GLOB_CHARACTERS) & set(f)]
    if gone:
        raise UnreadFilesError(
            f"source {batch.name!r}, partition {batch.partition}: {len(gone)} file(s) listed for the epoch that cannot "
            f"be found (a link to nothing, or deleted while the source listed it): {_some(gone)}",
            action="put the file back, or remove the name (a dangling link), and run again: the epoch is planned anew",
            source=batch.name, partition=batch.partition, files=gone,
        )


def planned_bytes(recorded: dict[str, Any]) -> int | None:
    """The bytes of a recorded plan's files, or None when not known: a source that lists no files (data it
    makes or reads from elsewhere), a plan recorded without fingerprints, a file without a size.

    A file source's plan records its ``files`` (an empty hour: none, 0 bytes)."""
    files = _planned(recorded).get("files")
    prints = recorded.get(_FINGERPRINTS)
    if files is None or prints is None or set(files) - set(prints):
        return None
    sizes = [(prints[f] or {}).get("size") for f in files]
    return None if None in sizes else sum(int(s) for s in sizes)


def check_unchanged(name: str, position: dict[str, Any], *, epoch: int, partition: str) -> None:
    """Refuse to replay an epoch whose planned input changed since the plan was recorded.

    A replay (after a crash or a restore) must read what the epoch read the first time; plans
    recorded before fingerprints existed are not checked. ``partition``: the epoch's key (what a backfill takes).
    """
    for path, recorded in (position.get(_FINGERPRINTS) or {}).items():
        now = fingerprint(path)
        if now != recorded:
            what = "is gone" if now is None else f"changed (recorded {recorded}, now {now})"
            raise InputChangedError(name, epoch, partition, path, what)


def source_names(sources: Sequence[Source]) -> list[str]:
    return [s.name for s in sources]
