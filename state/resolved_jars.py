"""The jars Ivy resolved for a ``spark.jars.packages`` list, remembered: later sessions skip the resolution.

A session asks for Delta (and S3A) by Maven coordinates, ``spark.jars.packages``,
and Spark's launcher runs Ivy before the driver starts: it reads the Ivy cache,
resolves the dependency graph and copies the jars into ``<ivy>/jars``, then sets
``spark.jars`` to the local files it found. That costs about a second of every
process's start on this project's 2-core machine (alternating fresh processes:
a session started in 4.6 and 5.5 s with the files named in ``spark.jars``
against 5.6 and 6.2 s resolving), and a scheduled run, a CLI command and each
test's child process all pay it.

So the first session that resolves a list of packages records the files Spark
resolved them to (its ``spark.jars``), and a later session asking for the same
packages, with the same Ivy settings, names those files in ``spark.jars``
instead, which is what the launcher would have done itself after resolving
(a local session puts them on its driver's class path instead:
:func:`epochal.state.driver_jars.driver_class_path`).
Nothing depends on the record: it is used only when every file it names still
exists, and a session whose configuration sets ``spark.jars`` or another
``spark.jars.*`` key itself (its own jars, repositories or Ivy settings)
resolves as before and records nothing. Where records live:
``EPOCHAL_RESOLVED_JARS`` (a folder, or ``off``), else
``$XDG_CACHE_HOME/epochal/jars/`` (``~/.cache``), one small JSON file per
package list and Ivy folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from epochal.state.jvm_archive import turned_off, user_cache

ENV = "EPOCHAL_RESOLVED_JARS"
PACKAGES = "spark.jars.packages"
JARS = "spark.jars"
IVY = "spark.jars.ivy"


def _folder(environ: Mapping[str, str]) -> Path | None:
    chosen = environ.get(ENV)
    if chosen is not None:
        return None if turned_off(chosen) else Path(chosen)
    return user_cache(environ) / "jars"


def record_path(packages: str, ivy: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The record of ``packages`` resolved with the Ivy folder ``ivy`` (None: Spark's default); None when off."""
    folder = _folder(os.environ if environ is None else environ)
    if folder is None:
        return None
    digest = hashlib.sha1(f"{packages}|{ivy or ''}".encode()).hexdigest()[:16]
    return folder / f"{digest}.json"


def applies(conf: Mapping[str, str]) -> bool:
    """Whether a session's conf may use or write a record: packages asked for, and no other ``spark.jars*`` key
    except the Ivy folder (which is part of the record's key)."""
    return bool(conf.get(PACKAGES)) and not any(
        key.startswith(JARS) and key not in (PACKAGES, IVY) for key in conf
    )


def recorded(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The files the conf's packages were resolved to before, if every one of them still exists."""
    if not applies(conf):
        return None
    path = record_path(conf[PACKAGES], conf.get(IVY), environ)
    try:
        record = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("packages") != conf[PACKAGES]:
        return None
    jars = record.get("jars")
    if not jars or not isinstance(jars, list) or not all(os.path.isfile(local_path(j)) for j in jars):
        return None
    return [str(j) for j in jars]


def remember(conf: Mapping[str, str], resolved: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """Record ``resolved`` (a started session's ``spark.jars``) for the conf's packages; the record's path."""
    jars = [j for j in (resolved or "").split(",") if j]
    if not applies(conf) or not jars or not all(os.path.isfile(local_path(j)) for j in jars):
        return None
    path = record_path(conf[PACKAGES], conf.get(IVY), environ)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"packages": conf[PACKAGES], "jars": jars}, indent=1), encoding="utf-8")
        os.replace(partial, path)  # two processes recording at once: either whole record wins
    except OSError:
        return None
    return path


def local_path(jar: str) -> str:
    """A ``spark.jars`` entry (``file:///...`` or a plain path) as a local path."""
    if jar.startswith("file://"):
        return jar[len("file://"):]
    if jar.startswith("file:"):
        return jar[len("file:"):]
    return jar
