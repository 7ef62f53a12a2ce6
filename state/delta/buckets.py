"""Object-store locations name a bucket that exists: epochal creates none.

fsspec's object stores make a missing bucket (or container) when asked for a folder in it (s3fs's ``makedirs``
does), so a misspelt bucket in ``checkpoints.dir`` or ``warehouse`` would become a new, empty bucket of the
account, and the deployment would start over in it. :func:`check_buckets` runs before a command's first write
(the deployment's lease) and refuses such a location, naming its configuration key, the location and the bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fsspec.core import url_to_fs

from epochal.state.delta.paths import to_url
from epochal.state.errors import LocationError

#: fsspec's schemes (after :func:`to_url`) whose first path segment is a bucket or container.
BUCKET_SCHEMES = frozenset({"s3", "gs", "gcs", "abfs", "abfss", "az", "adl"})


def bucket_of(location: str) -> tuple[str, str] | None:
    """``(scheme, bucket)`` of an object-store location; None for a local path or another file system."""
    scheme, _, rest = to_url(location).partition("://")
    if scheme not in BUCKET_SCHEMES:
        return None
    return scheme, rest.split("/", 1)[0]


def check_buckets(locations: Mapping[str, str | None], storage_options: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`LocationError` for the first of ``locations`` (configuration key -> location) on an object
    store whose bucket does not exist or cannot be reached; local paths and other file systems pass unasked."""
    asked: set[tuple[str, str]] = set()
    for key, location in locations.items():
        found = None if location is None else bucket_of(location)
        if found is None or found in asked:
            continue
        asked.add(found)
        scheme, bucket = found
        try:
            fs, _ = url_to_fs(f"{scheme}://{bucket}", **dict(storage_options or {}))
        except (ImportError, ValueError):  # no fsspec implementation here (a location only Spark reads): Spark's to say
            continue
        if fs.exists(bucket):
            continue
        try:  # exists() says False for any failure: listing says which
            fs.ls(bucket)
        except FileNotFoundError:
            raise LocationError(
                f"{key}: {location}: the bucket {bucket!r} does not exist (epochal creates no buckets)",
                action=f"create the bucket, or fix `{key}:` in the configuration", key=key, location=location,
            ) from None
        except Exception as exc:  # noqa: BLE001 - the store's own error, named with the location
            raise LocationError(
                f"{key}: {location}: the bucket {bucket!r} cannot be read: {type(exc).__name__}: {exc}",
                action="check the credentials and the endpoint in the environment (README, Object storage)",
                key=key, location=location,
            ) from exc
