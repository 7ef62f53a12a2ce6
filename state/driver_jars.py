"""Where a session's Delta jars go: Delta's packages, and a local driver's class path.

Delta's jars are asked for by Maven coordinates (:func:`delta_packages`, as delta's pip helper picks them), and
the files Ivy resolved them to are recorded (:mod:`epochal.state.resolved_jars`). A session on a local master
puts those files on its driver JVM's class path (:func:`driver_class_path`); one on a cluster names them in
``spark.jars``, which its executors fetch.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from epochal.state import resolved_jars


def is_local(master: str) -> bool:
    """A ``local``, ``local[n]`` or ``local[*]`` master: the executors run in the driver's JVM."""
    return master.startswith("local")


def delta_packages(extra: Sequence[str] = ()) -> str:
    """``spark.jars.packages`` for Delta (the coordinates delta's pip helper picks for this pyspark), then ``extra``.

    The helper sets them on a builder and accepts nothing else; a throwaway builder's options are read back.
    """
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = configure_spark_with_delta_pip(SparkSession.Builder(), extra_packages=list(extra))
    return builder._options[resolved_jars.PACKAGES]


#: The environment variable whose class path Spark's launcher appends to the driver JVM's (Spark's builds without
#: Hadoop use it): where a local session's resolved jars go (:func:`driver_class_path`).
LAUNCHER_CLASS_PATH = "SPARK_DIST_CLASSPATH"


def driver_class_path(master: str, jars: Sequence[str], *, ivy: str | None = None) -> list[str]:
    """The resolved ``jars`` as the driver JVM's class path (local files), for a local master; [] for another.

    Named in ``spark.jars``, every jar is also the executors': a local executor, in the driver's JVM, fetched
    each one from the driver's file server into a folder of its own and ran ``chmod`` on it, at every start (89 MB
    for Delta, 780 MB with S3A's AWS bundle), and loaded them through a class loader of its own, whose classes
    the JVM's class archive (:mod:`epochal.state.jvm_archive`) cannot hold. On the class path the same files are
    read in place and Delta's classes come from the archive. An executor of a cluster runs in a JVM of its own,
    which needs ``spark.jars``: none there.

    The jars of Delta's own packages come first, in their recorded order, then the others (S3A's): the archive
    is written with Delta's alone, and the JVM maps it only into a class path that begins with the archive's.
    """
    if not is_local(master):
        return []
    local = [resolved_jars.local_path(j) for j in jars]
    first = [j for j in default_class_path(ivy) if j in local]
    return first + [j for j in local if j not in first]


def default_class_path(ivy: str | None = None) -> list[str]:
    """The jars Delta's own packages were resolved to, as local files ([] before the first resolution)."""
    conf = {resolved_jars.PACKAGES: delta_packages(), **({resolved_jars.IVY: ivy} if ivy else {})}
    return [resolved_jars.local_path(j) for j in resolved_jars.recorded(conf) or ()]


@contextlib.contextmanager
def launcher_class_path(class_path: Sequence[str]):
    """:data:`LAUNCHER_CLASS_PATH` with ``class_path`` appended while a driver JVM starts, then as it was."""
    before = os.environ.get(LAUNCHER_CLASS_PATH)
    if class_path:
        os.environ[LAUNCHER_CLASS_PATH] = os.pathsep.join([*filter(None, [before]), *class_path])
    try:
        yield
    finally:
        if class_path:
            if before is None:
                os.environ.pop(LAUNCHER_CLASS_PATH, None)
            else:
                os.environ[LAUNCHER_CLASS_PATH] = before
