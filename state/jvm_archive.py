"""A class-data-sharing archive for the Spark driver's JVM: faster start-up of every run.

Starting Spark and running its first Delta write and MERGE loads some tens of
thousands of classes (Spark, Scala, Delta), and a scheduled run pays that in
every process. HotSpot's application class-data sharing (AppCDS, JDK 13+) maps
classes parsed and verified once from an archive instead. The set-up step
(``python -m epochal.state.session --warm``) runs a small Delta workload in a
JVM started with ``-XX:ArchiveClassesAtExit`` and keeps the archive in the
user's cache; every later session adds ``-XX:SharedArchiveFile`` to the
driver's JVM options (``spark.driver.defaultJavaOptions``, which Spark puts
before the user's ``spark.driver.extraJavaOptions``).

Nothing depends on it: the archive is used only if present, and the JVM checks
it (same JDK build, same class path) and silently ignores one that does not
fit (the options below keep it quiet). Where it lives: ``EPOCHAL_JVM_ARCHIVE``
(a path, or ``off``), else ``$XDG_CACHE_HOME/epochal/jvm/`` (``~/.cache``),
one file per Spark release, Java binary, Python environment and set of Delta
jars: a local session has Delta's jars on its driver's class path
(:func:`epochal.state.driver_jars.driver_class_path`), so the archive holds Delta's
classes too, and the set-up step writes it from such a session. A user
``spark.conf`` entry ``spark.driver.defaultJavaOptions`` replaces ours.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV = "EPOCHAL_JVM_ARCHIVE"
OPTION = "spark.driver.defaultJavaOptions"
# A missing or mismatched archive is not worth a warning on the run's output.
_QUIET = "-Xlog:cds*=off -Xlog:class+path=off"


def _java(environ: Mapping[str, str]) -> str:
    """The java binary Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java", path=environ.get("PATH"))
    return os.path.realpath(found) if found else "java"


def archive_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where this environment's archive is (or would be written); None when turned off."""
    env = os.environ if environ is None else environ
    chosen = env.get(ENV)
    if chosen is not None:
        return None if turned_off(chosen) else Path(chosen)
    import pyspark

    from epochal.state.driver_jars import default_class_path  # it builds on resolved_jars, which builds on this

    jars = Path(os.path.realpath(pyspark.__file__)).parent / "jars"
    delta = default_class_path(env.get("EPOCHAL_IVY_DIR"))
    identity = "|".join((pyspark.__version__, str(jars), _java(env), sys.prefix, jars_fingerprint(jars),
                         files_fingerprint(delta)))
    digest = hashlib.sha1(identity.encode()).hexdigest()[:12]
    return user_cache(env) / "jvm" / f"spark-{pyspark.__version__}-{digest}.jsa"


def user_cache(environ: Mapping[str, str]) -> Path:
    """epochal's folder in the user's cache: ``$XDG_CACHE_HOME/epochal``, else ``~/.cache/epochal``."""
    return Path(environ.get("XDG_CACHE_HOME") or Path(environ.get("HOME") or Path.home()) / ".cache") / "epochal"


def turned_off(value: str) -> bool:
    """Whether an environment variable naming a cached file or folder says not to use one (``off``, empty...)."""
    return value.strip().lower() in ("", "off", "none", "false", "0")


def jars_fingerprint(folder: Path) -> str:
    """Path, size and modification time of every jar in ``folder`` (Spark's class path): what the JVM checks
    before it maps an archive. A virtualenv re-created at the same path, or pyspark reinstalled, gets new
    jar files and so another archive, instead of one the JVM would silently refuse for ever."""
    try:
        paths = sorted(e.path for e in os.scandir(folder) if e.name.endswith(".jar"))
    except OSError:
        return ""
    return files_fingerprint(paths)


def files_fingerprint(paths: Sequence[str]) -> str:
    """Path, size and modification time of each file, in order (a local session's Delta jars, on the driver's
    class path after Spark's, are in the archive too: new or re-downloaded ones need another); "" for none."""
    if not paths:
        return ""
    entries = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return ""
        entries.append((path, st.st_size, st.st_mtime_ns))
    return hashlib.sha1(repr(entries).encode()).hexdigest()


def use_options(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark conf that makes the driver's JVM map the archive: empty without an archive."""
    path = archive_path(environ)
    if path is None or not path.is_file():
        return {}
    return {OPTION: f"-XX:SharedArchiveFile={path} {_QUIET}"}


def dump_options(target: Path) -> dict[str, str]:
    """The Spark conf that makes the driver's JVM write its loaded classes to ``target`` when it exits."""
    return {OPTION: f"-XX:ArchiveClassesAtExit={target} {_QUIET}"}


def stop_jvm() -> int | None:
    """End the gateway JVM of this Python process and wait for it (it writes its archive as it exits).

    PySpark's gateway exits when its stdin closes; the session must be stopped first.
    Returns the JVM's exit code (None when this process started no gateway).
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    if proc.stdin is not None:
        proc.stdin.close()
    code = proc.wait(timeout=600)
    SparkContext._gateway = None
    SparkContext._jvm = None
    return code


def keep(partial: Path, archive: Path) -> None:
    """Make a freshly written archive the environment's own, recording whose it is (Python environment and
    java binary), and delete the archives of Python environments that no longer exist and the ones this
    environment and java had before (each is some 200 MB)."""
    os.replace(partial, archive)
    mine = (sys.prefix, _java(os.environ))
    _owner(archive).write_text("\n".join(mine), encoding="utf-8")
    for other in archive.parent.glob("*.jsa"):
        owner = _owner(other)
        if other == archive or not owner.is_file():
            continue
        prefix, _, java = owner.read_text(encoding="utf-8").partition("\n")
        # Gone, or superseded: this environment's archive of before (new jars; a note without java is older).
        if not Path(prefix).is_dir() or (prefix == mine[0] and java in ("", mine[1])):
            other.unlink(missing_ok=True)
            owner.unlink(missing_ok=True)


def _owner(archive: Path) -> Path:
    return archive.with_suffix(".python")
