"""Every spelling of a location, in one place: fsspec URLs, Spark paths and handle paths.

No other module converts paths. Three spellings of one location meet here:

* fsspec URLs (``file:///x``, ``s3://b/x``), the currency of :class:`CheckpointStorage`;
* Spark paths (``/x`` for local files, because Delta refuses ``file:///`` in
  ``CREATE TABLE ... LOCATION``; ``s3a://b/x`` for S3);
* handle paths: the working table itself (an absolute Spark path or URL) for
  incremental checkpoints, or a path RELATIVE to the folder holding the
  ``_metadata`` (``state/<stage>/<state>``) for the copies of full checkpoints
  and savepoints, so that such a folder can be moved and still restored.
"""

from __future__ import annotations

import os
import posixpath

from epochal.state.errors import CheckpointStorageError, SnapshotUnavailable
from epochal.state.handles import StateHandle

# fsspec's spelling of a scheme, and Spark's (Hadoop's S3A connector reads s3://, s3a:// and s3n://).
_FS_SCHEMES = {"s3a": "s3", "s3n": "s3", "file": "file", "local": "file"}
_SPARK_SCHEMES = {"s3": "s3a", "s3n": "s3a", "gcs": "gs", "az": "abfss", "abfs": "abfss"}
SHARED_DIR = "shared"  # <checkpoints>/shared/<stage>/<state>: the working state tables


def is_relative(table_path: str) -> bool:
    """True for a handle path relative to its ``_metadata`` folder."""
    return "://" not in table_path and not table_path.startswith(("/", "file:"))


def to_url(path: str) -> str:
    """The normalised fsspec URL of a Spark path, local path or URL (no trailing slash)."""
    if path.startswith("file:") and not path.startswith("file://"):
        path = "file://" + path[len("file:"):]
    if "://" not in path:
        return "file://" + posixpath.normpath(os.path.abspath(path))
    scheme, rest = path.split("://", 1)
    scheme = _FS_SCHEMES.get(scheme, scheme)
    if scheme == "file":
        return "file://" + posixpath.normpath("/" + rest.lstrip("/"))
    return f"{scheme}://{rest.rstrip('/')}"


def to_spark(path_or_url: str) -> str:
    """The path Spark and Delta use for a URL or path: local files as plain absolute paths
    (Delta refuses ``file:///`` in ``CREATE TABLE ... LOCATION``), ``s3://`` as ``s3a://``."""
    url = to_url(path_or_url)
    scheme, rest = url.split("://", 1)
    if scheme == "file":
        return rest
    if scheme == "memory":
        raise CheckpointStorageError(
            f"Spark cannot read fsspec memory URLs ({path_or_url}).",
            action="use a file:// or object-store URL for Delta tables.",
            path=path_or_url,
        )
    return f"{_SPARK_SCHEMES.get(scheme, scheme)}://{rest}"


def same_location(a: str, b: str) -> bool:
    return to_url(a) == to_url(b)


def join_url(base: str, relative: str) -> str:
    """``relative`` under ``base`` (a URL); ``..`` segments may not climb out of ``base``."""
    base = to_url(base)
    joined = posixpath.normpath(posixpath.join(base.split("://", 1)[1], relative))
    scheme = base.split("://", 1)[0]
    url = f"{scheme}://{joined}" if scheme != "file" else "file://" + joined
    if not inside(url, base):
        raise ValueError(f"{relative!r} escapes {base}")
    return url


def inside(url: str, folder: str) -> bool:
    """True if ``url`` is ``folder`` or below it."""
    url, folder = to_url(url), to_url(folder)
    return url == folder or url.startswith(folder.rstrip("/") + "/")


def folder_of(metadata_path: str) -> str:
    """The folder holding a ``_metadata`` file."""
    return to_url(metadata_path).rsplit("/", 1)[0]


def resolve_table_url(handle: StateHandle, metadata_path: str | None) -> str:
    """The fsspec URL of the table a handle names (relative paths resolved against ``metadata_path``)."""
    if is_relative(handle.table_path):
        if metadata_path is None:
            raise ValueError(f"handle {handle.key} has the relative path {handle.table_path!r}: pass its metadata path")
        try:
            return join_url(folder_of(metadata_path), handle.table_path)
        except ValueError as exc:
            raise SnapshotUnavailable(
                f"State {handle.key} of {metadata_path} names the table {handle.table_path!r}, which escapes the "
                "checkpoint's folder: a copy must lie inside it.",
                action="restore from another checkpoint or savepoint.",
                state=handle.key, path=metadata_path,
            ) from exc
    return to_url(handle.table_path)


def resolve_handle_path(handle: StateHandle, metadata_path: str | None) -> str:
    """The absolute Spark path of the table a handle names: read it with ``versionAsOf=handle.version``."""
    return to_spark(resolve_table_url(handle, metadata_path))
