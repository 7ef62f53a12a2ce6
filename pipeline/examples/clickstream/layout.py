"""Partition keys, epoch windows and the landing layout of the clickstream example.

Partition keys are Dagster's: hourly ``2026-11-01-13:00`` (the window
[13:00, 14:00) UTC); a daily key ``2026-11-01`` is accepted too (its 24 hours).
Landing files live at ``<landing>/dt=YYYY-MM-DD/hour=HH/part-NNNN.jsonl``,
where the folder is the UTC hour the file was delivered in; a file directly in
a day folder, or in a folder of it not named ``hour=HH`` (00 to 23), is in no hour
(:func:`day_folder_strays` names such files and folders).
"""

from __future__ import annotations

import fnmatch
import re
from datetime import datetime, timedelta, timezone

import fsspec

HOURLY_KEY_FORMAT = "%Y-%m-%d-%H:%M"
DAILY_KEY_FORMAT = "%Y-%m-%d"
HOUR = timedelta(hours=1)
_HOUR_FOLDER = re.compile(r"hour=([0-9]+)")


def partition_key(hour_start: datetime) -> str:
    """The hourly partition key of the hour starting at ``hour_start`` (UTC)."""
    return _utc(hour_start).strftime(HOURLY_KEY_FORMAT)


def partition_window(key: str) -> tuple[datetime, datetime]:
    """The UTC window ``[start, end)`` of an hourly or daily partition key."""
    for fmt, width in ((HOURLY_KEY_FORMAT, HOUR), (DAILY_KEY_FORMAT, timedelta(days=1))):
        try:
            start = datetime.strptime(key, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        if start.strftime(fmt) == key and start.minute == 0:
            return start, start + width
    raise ValueError(f"not an hourly ('2026-11-01-13:00') or daily ('2026-11-01') partition key: {key!r}")


def epoch_clock(key: str) -> datetime:
    """The epoch clock of a partition: the end of its window (used for the dedupe TTL)."""
    return partition_window(key)[1]


def hours_of(key: str) -> list[datetime]:
    """The starts of the UTC hours inside a partition window."""
    start, end = partition_window(key)
    return [start + i * HOUR for i in range(int((end - start) / HOUR))]


def hour_dir(landing: str, hour_start: datetime) -> str:
    """The landing folder of one UTC hour: ``<landing>/dt=YYYY-MM-DD/hour=HH``."""
    hour_start = _utc(hour_start)
    return f"{landing.rstrip('/')}/dt={hour_start:%Y-%m-%d}/hour={hour_start:%H}"


def part_file_name(index: int) -> str:
    """The name of the ``index``-th file of an hour folder."""
    return f"part-{index:04d}.jsonl"


def partition_files(landing: str, key: str) -> list[str]:
    """Every ``*.jsonl`` file of a partition, sorted, in the form the landing URL was given.

    A plain local path gives absolute local paths; an fsspec URL (``file://``,
    ``s3://``, ``memory://``...) gives URLs with the same protocol.
    """
    return partition_listing(landing, key)[0]


def partition_listing(landing: str, key: str, pattern: str = "*.jsonl") -> tuple[list[str], list[str], list[str]]:
    """The files of a partition's hour folders whose name matches ``pattern`` (sorted, as
    :func:`partition_files` gives them), the others there, which are not read (names starting
    with ``.`` or ``_``, such as ``_SUCCESS`` or a ``.crc``, are neither, whatever the pattern), and the
    folders there whose name matches ``pattern`` (``x.jsonl/``), which are not files to read."""
    fs, root = fsspec.core.url_to_fs(landing)
    found: list[str] = []
    ignored: list[str] = []
    folders: list[str] = []
    for hour_start in hours_of(key):
        try:
            entries = sorted(fs.ls(hour_dir(root, hour_start), detail=True), key=lambda e: e["name"])
        except FileNotFoundError:  # an hour without a folder: no files
            continue
        for entry in entries:
            path, name = entry["name"], _name(entry["name"])
            if name.startswith((".", "_")):  # never data, as for Spark's own listings
                continue
            if not fnmatch.fnmatchcase(name, pattern):
                ignored.append(path)
            else:
                (folders if entry.get("type") == "directory" else found).append(path)
    return _as_given(fs, landing, found), _as_given(fs, landing, ignored), _as_given(fs, landing, folders)


def day_folder_files(landing: str, key: str) -> list[str]:
    """The files directly in the day folders ``<landing>/dt=YYYY-MM-DD`` of a partition's window, outside
    any hour folder, which no partition reads (sorted, as :func:`partition_files` gives them; names starting
    with ``.`` or ``_`` aside). One listing per day, whatever the partition's width."""
    return day_folder_strays(landing, key)[0]


def day_folder_strays(landing: str, key: str) -> tuple[list[str], list[tuple[str, str]]]:
    """What the day folders ``<landing>/dt=YYYY-MM-DD`` of a partition's window hold outside any hour folder,
    which no partition reads: the files directly there (as :func:`day_folder_files`), and the folders there
    not named ``hour=HH`` (00 to 23) that hold files, each with what is wrong (``hour=4 is not an hour folder:
    name it hour=04``). Names starting with ``.`` or ``_`` aside, in both. One listing per day, and one more
    per misnamed folder."""
    fs, root = fsspec.core.url_to_fs(landing)
    loose: list[str] = []
    misnamed: list[tuple[str, str]] = []
    for day in sorted({_utc(hour_start).strftime("%Y-%m-%d") for hour_start in hours_of(key)}):
        try:
            entries = fs.ls(f"{root.rstrip('/')}/dt={day}", detail=True)
        except FileNotFoundError:  # a day without a folder: nothing misplaced
            continue
        for entry in sorted(entries, key=lambda e: e["name"]):
            path, name = entry["name"], _name(entry["name"])
            if name.startswith((".", "_")):  # never data, as for Spark's own listings
                continue
            if entry.get("type") != "directory":
                loose.append(path)
            elif (mistake := hour_folder_mistake(name)) and _holds_data(fs, path):
                misnamed.append((path, mistake))
    paths = _as_given(fs, landing, [path for path, _ in misnamed])
    return _as_given(fs, landing, loose), [(path, why) for path, (_, why) in zip(paths, misnamed)]


def hour_folder_mistake(name: str) -> str | None:
    """None for the name of an hour folder, ``hour=00`` to ``hour=23``; else what is wrong with it."""
    match = _HOUR_FOLDER.fullmatch(name)
    if match and len(match.group(1)) == 2 and int(match.group(1)) < 24:
        return None
    if match and int(match.group(1)) < 24:
        return f"{name} is not an hour folder: name it hour={int(match.group(1)):02d}"
    if match:
        return f"{name} is not an hour folder: hours run from hour=00 to hour=23 (UTC)"
    return f"{name} is not an hour folder: move its files into the hour=HH folder (00 to 23) of their UTC hour"


def _holds_data(fs, folder: str) -> bool:
    """Whether a folder holds a file, at any depth, in no folder and of no name starting with ``.`` or ``_``."""
    base = folder.rstrip("/") + "/"
    relative = (path[len(base):] if path.startswith(base) else _name(path) for path in fs.find(folder))
    return any(not any(part.startswith((".", "_")) for part in rel.split("/")) for rel in relative)


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _as_given(fs, landing: str, paths: list[str]) -> list[str]:
    """Listed paths in the form the landing URL was given: with its protocol if it had one."""
    if "://" in landing:
        return [fs.unstrip_protocol(p) for p in paths]
    return paths


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)
