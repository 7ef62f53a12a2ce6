"""Checkpoint storage over fsspec URLs (Flink's CheckpointStorage).

Layout under the checkpoints URL::

    chk-<id>/_metadata            one completed (or being completed) checkpoint
    shared/<stage>/<state>/       Delta state tables shared across checkpoints
    savepoints/<name>/_metadata   user savepoints (or under ``savepoints_url``)
    ids/<n>                       claimed checkpoint ids (FileIdCounter)
    _completed/                   the completed-checkpoint store (a Delta table)
    _stats/history.jsonl          checkpoint statistics
    _failures.json                the failure manager's state

Every public path is a URL string (``file:///...``, ``memory:///...``,
``s3://...``). Writes are atomic: a reader sees the old file, no file, or the
whole new file, never a prefix.
"""

from __future__ import annotations

import os
import posixpath
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from epochal.state.delta.paths import SHARED_DIR
from epochal.state.errors import CheckpointNotFound, CheckpointStorageError, InvalidSavepointName
from epochal.state.ids import CheckpointId

METADATA_FILE = "_metadata"
#: In a savepoint folder while the savepoint is being taken: removed once it is committed.
#: A folder that still has it and is not committed was abandoned (the process died).
SAVEPOINT_IN_PROGRESS = "_in_progress"
CHECKPOINT_PREFIX = "chk-"
_CHECKPOINT_DIR = re.compile(r"^chk-(\d+)$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
# Object stores where one PUT is atomic (a reader never sees a partial object).
ATOMIC_PUT_PROTOCOLS = frozenset({"memory", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci", "r2"})


class PointerKind(str, Enum):
    CHECKPOINT_ID = "checkpoint_id"
    CHECKPOINT_PATH = "checkpoint_path"
    SAVEPOINT_PATH = "savepoint_path"


@dataclass(frozen=True)
class CheckpointPointer:
    """Where an external pointer leads: the ``_metadata`` URL and, when known, the id."""

    pointer: str
    kind: PointerKind
    metadata_path: str
    checkpoint_id: CheckpointId | None
    owned: bool  # under this storage's checkpoints or savepoints folder


def validate_name(name: str, *, what: str = "savepoint name") -> str:
    """Return ``name`` if it is one safe path segment, else raise InvalidSavepointName.

    A savepoint name must also not read as a checkpoint pointer (``7``, ``chk-7``).
    """
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name) or ".." in name:
        raise InvalidSavepointName(
            f"Invalid {what} {name!r}: use 1-128 letters, digits, '_', '-', '.', starting with a letter "
            "or digit, without '..' or '/'.",
            action=f"choose another {what}.",
            name=name,
        )
    if what == "savepoint name" and (name.isdigit() or _CHECKPOINT_DIR.fullmatch(name)):
        raise InvalidSavepointName(
            f"Invalid {what} {name!r}: it reads as a checkpoint (an id or a chk-<id> folder).",
            action=f"choose another {what}, with a letter in it.",
            name=name,
        )
    return name


class CheckpointStorage:
    """Paths and atomic file I/O for checkpoints and savepoints on one fsspec filesystem."""

    def __init__(
        self, base_url: str, savepoints_url: str | None = None, storage_options: dict[str, Any] | None = None
    ) -> None:
        self._options = dict(storage_options or {})
        self._fs, self._base = url_to_fs(base_url, **self._options)
        self._base = self._base.rstrip("/") or "/"
        self._savepoints = self._strip(savepoints_url) if savepoints_url else posixpath.join(self._base, "savepoints")

    # ----------------------------------------------------------------- paths
    @property
    def storage_options(self) -> dict[str, Any]:
        return dict(self._options)

    @property
    def base_url(self) -> str:
        return self._url(self._base)

    @property
    def savepoints_url(self) -> str:
        return self._url(self._savepoints)

    @property
    def savepoints_inside_base(self) -> bool:
        """True when savepoints live under the checkpoints folder (no separate ``savepoints_dir``)."""
        return _strictly_inside(posixpath.normpath(self._savepoints), self._base)

    @property
    def protocol(self) -> str:
        protocol = self._fs.protocol
        return protocol if isinstance(protocol, str) else protocol[0]

    def checkpoint_dir(self, checkpoint_id: int) -> str:
        return self._url(posixpath.join(self._base, f"{CHECKPOINT_PREFIX}{int(checkpoint_id)}"))

    def metadata_path(self, checkpoint_id: int) -> str:
        return self.checkpoint_dir(checkpoint_id) + "/" + METADATA_FILE

    @property
    def shared_url(self) -> str:
        """``<checkpoints>/shared``: the working state tables, one Delta table per stage and state."""
        return self._url(posixpath.join(self._base, SHARED_DIR))

    def shared_dir(self, stage: str, state: str) -> str:
        stage, state = validate_name(stage, what="stage name"), validate_name(state, what="state name")
        return self._url(posixpath.join(self._base, SHARED_DIR, stage, state))

    def savepoint_dir(self, name: str) -> str:
        return self._url(posixpath.join(self._savepoints, validate_name(name)))

    def savepoint_metadata_path(self, name: str) -> str:
        return self.savepoint_dir(name) + "/" + METADATA_FILE

    def child(self, *parts: str) -> str:
        """A URL under the checkpoints folder (``ids``, ``_stats/history.jsonl``...)."""
        return self._url(posixpath.join(self._base, *parts))

    @property
    def ids_url(self) -> str:
        return self.child("ids")

    @property
    def completed_store_url(self) -> str:
        return self.child("_completed")

    @property
    def stats_path(self) -> str:
        return self.child("_stats", "history.jsonl")

    @property
    def failure_state_path(self) -> str:
        return self.child("_failures.json")

    # -------------------------------------------------------------------- io
    def write_atomic(self, url: str, data: bytes) -> None:
        """Write ``data`` so a reader sees the old file, no file, or all of ``data``."""
        path = self._strip(url)
        try:
            if isinstance(self._fs, LocalFileSystem):
                _write_local_atomic(path, data)
            elif self.protocol in ATOMIC_PUT_PROTOCOLS:
                self._fs.pipe_file(path, data)
            else:
                self._write_then_move(path, data)
        except OSError as exc:
            raise self._io_error("write", url, exc) from exc

    def read(self, url: str) -> bytes:
        """Return the bytes at ``url`` (any fsspec URL, not only under the base)."""
        fs, path = self._locate(url)
        try:
            return fs.cat_file(path)
        except FileNotFoundError as exc:
            raise CheckpointNotFound(
                f"No file at {url}.", action="check the path, or list checkpoints with `epochal checkpoints list`.",
                pointer=url, path=url,
            ) from exc
        except OSError as exc:
            raise self._io_error("read", url, exc) from exc

    def exists(self, url: str) -> bool:
        fs, path = self._locate(url)
        return bool(fs.exists(path))

    def modified_at(self, url: str) -> datetime | None:
        """When the file at ``url`` was last written (None if the filesystem does not say)."""
        fs, path = self._locate(url)
        try:
            modified = fs.modified(path)
        except (NotImplementedError, OSError):
            return None
        return modified if modified.tzinfo is not None else modified.replace(tzinfo=timezone.utc)

    def list_names(self, url: str) -> list[str]:
        """Base names of the entries directly under ``url`` (empty if it does not exist)."""
        fs, path = self._locate(url)
        try:
            entries = fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        except OSError as exc:  # refused credentials, an endpoint down: say where
            raise self._io_error("list", url, exc) from exc
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    def list_checkpoint_dirs(self) -> list[tuple[CheckpointId, str]]:
        """Every ``chk-<id>`` folder (completed or not), by ascending id."""
        matches = (_CHECKPOINT_DIR.match(name) for name in self.list_names(self.base_url))
        ids = sorted(int(m.group(1)) for m in matches if m)
        return [(CheckpointId(i), self.checkpoint_dir(i)) for i in ids]

    def list_savepoints(self) -> list[str]:
        """Names of the savepoint folders."""
        return [n for n in self.list_names(self.savepoints_url) if _SAFE_NAME.match(n)]

    def delete_tree(self, url: str) -> None:
        """Delete a folder (or file) strictly inside the checkpoints or savepoints folder."""
        fs, path = self._locate(url)
        path = posixpath.normpath(path)
        if fs is not self._fs or not any(_strictly_inside(path, root) for root in (self._base, self._savepoints)):
            raise CheckpointStorageError(
                f"Refusing to delete {url}: it is not inside {self.base_url} or {self.savepoints_url}.",
                action="pass a path inside the checkpoint storage.",
                path=url,
            )
        try:
            if self._fs.exists(path):
                self._fs.rm(path, recursive=True)
        except OSError as exc:
            raise self._io_error("delete", url, exc) from exc

    def create_exclusive(self, url: str, data: bytes) -> bool:
        """Create ``url`` only if absent (O_CREAT|O_EXCL); False if it already exists."""
        path = self._strip(url)
        try:
            self._fs.makedirs(self._fs._parent(path), exist_ok=True)
            with self._fs.open(path, "xb") as handle:
                handle.write(data)
        except FileExistsError:
            return False
        except OSError as exc:
            raise self._io_error("create", url, exc) from exc
        return True

    # -------------------------------------------------------------- pointers
    def resolve_pointer(self, pointer: str | int) -> CheckpointPointer:
        """Turn an id, a ``chk-<id>`` path or a savepoint path (or name) into a metadata URL.

        Ids are not checked here (the completed-checkpoint store knows them);
        paths must have a ``_metadata`` file, else CheckpointNotFound.
        """
        text = str(pointer).strip()
        if text.isdigit():
            cid = CheckpointId(int(text))
            return CheckpointPointer(text, PointerKind.CHECKPOINT_ID, self.metadata_path(cid), cid, True)
        candidates = self._pointer_candidates(text)
        for candidate in candidates:
            if self.exists(candidate.metadata_path):
                return candidate
        looked = ", ".join(c.metadata_path for c in candidates)
        raise CheckpointNotFound(
            f"No checkpoint or savepoint at {text!r}: no {METADATA_FILE} file found"
            + (f" (looked for {looked})" if looked else "") + ".",
            action="pass a checkpoint id, a chk-<id> folder or a savepoint folder "
            "(see `epochal checkpoints list`).",
            pointer=text,
        )

    def _pointer_candidates(self, text: str) -> list[CheckpointPointer]:
        folder = text.rstrip("/")
        if folder.endswith("/" + METADATA_FILE) or folder == METADATA_FILE:
            folder = folder[: -len(METADATA_FILE)].rstrip("/")
        candidates = []
        if _SAFE_NAME.match(folder) and not _CHECKPOINT_DIR.match(folder):
            candidates.append(self._savepoint_pointer(text, self.savepoint_dir(folder)))
        if _CHECKPOINT_DIR.match(folder):
            candidates.append(self._checkpoint_pointer(text, self.checkpoint_dir(int(folder[4:]))))
        if folder:
            candidates.append(self._path_pointer(text, folder))
        return candidates

    def _path_pointer(self, text: str, folder: str) -> CheckpointPointer:
        url = self._as_url(folder)
        match = _CHECKPOINT_DIR.match(posixpath.basename(url))
        return self._checkpoint_pointer(text, url) if match else self._savepoint_pointer(text, url)

    def _checkpoint_pointer(self, text: str, folder_url: str) -> CheckpointPointer:
        cid = CheckpointId(int(_CHECKPOINT_DIR.match(posixpath.basename(folder_url)).group(1)))  # type: ignore[union-attr]
        owned = self._owns(folder_url, self._base)
        return CheckpointPointer(text, PointerKind.CHECKPOINT_PATH, folder_url + "/" + METADATA_FILE, cid, owned)

    def _savepoint_pointer(self, text: str, folder_url: str) -> CheckpointPointer:
        owned = self._owns(folder_url, self._savepoints)
        return CheckpointPointer(text, PointerKind.SAVEPOINT_PATH, folder_url + "/" + METADATA_FILE, None, owned)

    # --------------------------------------------------------------- helpers
    def _url(self, path: str) -> str:
        return self._fs.unstrip_protocol(path)

    def _strip(self, url: str) -> str:
        return self._fs._strip_protocol(url).rstrip("/") or "/"

    def _as_url(self, text: str) -> str:
        """A full URL for ``text`` (a URL already, or a path on this storage's filesystem)."""
        if "://" in text:
            return text
        if isinstance(self._fs, LocalFileSystem):
            return self._url(os.path.abspath(text))
        return self._url(text)

    def _owns(self, url: str, root: str) -> bool:
        fs, path = self._locate(url)
        return fs is self._fs and _strictly_inside(posixpath.normpath(path), root)

    def _locate(self, url: str) -> tuple[fsspec.AbstractFileSystem, str]:
        """The filesystem and path for ``url``; foreign URLs get their own filesystem."""
        if "://" not in url or url.split("://", 1)[0] in _protocols(self._fs):
            return self._fs, self._strip(url)
        fs, path = url_to_fs(url, **self._options)
        return fs, path

    def _write_then_move(self, path: str, data: bytes) -> None:
        tmp = posixpath.join(self._fs._parent(path), f".{posixpath.basename(path)}.tmp-{uuid.uuid4().hex}")
        self._fs.pipe_file(tmp, data)
        self._fs.mv(tmp, path)

    @staticmethod
    def _io_error(verb: str, url: str, exc: BaseException) -> CheckpointStorageError:
        return CheckpointStorageError(
            f"Could not {verb} {url}: {str(exc).rstrip('.')}.",
            action="check the checkpoint storage is reachable and writable, then retry.",
            path=url,
        )


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _strictly_inside(path: str, root: str) -> bool:
    root = root.rstrip("/")
    return path.rstrip("/") != root and path.startswith(root + "/")


def _write_local_atomic(path: str, data: bytes) -> None:
    """Write a temp file in the same folder, fsync it, rename it over ``path``, fsync the folder."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
