"""Storage locations: plain paths or fsspec URLs, and the rule that makes paths absolute.

A location in the configuration (``landing``, ``warehouse``, ``checkpoints.dir``,
``checkpoints.savepoints_dir``, ``dagster.home``) is a string, either

* an fsspec URL ``<scheme>://<rest>`` with a known scheme (:data:`KNOWN_SCHEMES`),
  used as it is; or
* a plain filesystem path. ``~`` is expanded. A relative plain path is made
  absolute by :func:`resolve_path` against a base directory: when the settings
  come from a YAML file, the directory of that file for values written in the
  file and for defaults; the current working directory for values given by
  environment variables, or when no file is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: URL schemes accepted for storage locations (fsspec protocol names).
KNOWN_SCHEMES: frozenset[str] = frozenset(
    {"file", "local", "memory", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "hdfs"}
)

_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)$", re.DOTALL)
# "s3:/bucket", "foo:bar": a scheme-like prefix of two or more characters without "//".
# (A single letter followed by ":" is a Windows drive and stays a plain path.)
_SCHEME_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")


def url_scheme(value: str) -> str | None:
    """The lower-cased scheme of ``value`` if it is written as ``scheme://...``, else None."""
    match = _URL.match(value)
    return match.group("scheme").lower() if match else None


def is_url(value: str) -> bool:
    """True if ``value`` is written as a URL (``scheme://...``) rather than a plain path."""
    return url_scheme(value) is not None


def check_location(value: str) -> str:
    """Validate a storage location (plain path or fsspec URL); return it unchanged.

    Raises ValueError with a message saying what is allowed.
    """
    if not value.strip():
        raise ValueError("must not be empty: give a path or an fsspec URL (file://, s3://, ...)")
    if value != value.strip():
        raise ValueError("must not start or end with whitespace")
    match = _URL.match(value)
    if match:
        scheme = match.group("scheme").lower()
        if scheme not in KNOWN_SCHEMES:
            raise ValueError(f"unknown URL scheme '{scheme}://': use a plain path or one of {_schemes()}")
        if not match.group("rest"):
            raise ValueError(f"URL '{value}' has nothing after '{scheme}://'")
        return value
    if _SCHEME_LIKE.match(value):
        raise ValueError(f"looks like a URL without '//': use a plain path or one of {_schemes()}")
    return value


def check_local_path(value: str) -> str:
    """Validate a local directory path (no URL); return it unchanged."""
    check_location(value)
    if is_url(value):
        raise ValueError("must be a local directory path, not a URL")
    return value


def resolve_path(value: str, base: str | Path) -> str:
    """Make a plain relative path absolute against ``base``; expand ``~``; leave URLs alone.

    The result is normalised (``a/../b`` becomes ``b``) but symlinks are not resolved.
    """
    if is_url(value):
        return value
    expanded = os.path.expanduser(value)
    if os.path.isabs(expanded):
        return os.path.normpath(expanded)
    return os.path.normpath(os.path.join(Path(base).absolute(), expanded))


def join_location(base: str, *parts: str) -> str:
    """Join path segments onto a path or URL with ``/`` (fsspec style)."""
    joined = base
    for part in parts:
        if not joined.endswith("/"):
            joined += "/"
        joined += part.strip("/")
    return joined


def _schemes() -> str:
    """The known schemes as a short human list."""
    return ", ".join(f"{scheme}://" for scheme in sorted(KNOWN_SCHEMES))
