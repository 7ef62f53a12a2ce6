"""Session settings an epoch changes while it runs, by its size or its place in the run, and puts back after.

An epoch's data (the bytes its sources planned plus the state at the last checkpoint) chooses how Spark
evaluates and joins (:func:`code_generation`, :func:`join_strategy`); a run's last epoch writes Delta's
checksum files (:func:`checksum_files`). A key the configuration's ``spark.conf`` sets itself is left alone,
and each yields what the epoch ran with, for its report (docs/performance.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from epochal.config import SparkSettings
from epochal.state.session import CHECKSUM_FILES

_MB = 1024 * 1024

#: Spark evaluates every expression interpreted: no whole-stage code, and the expression factories skip Janino
#: (``NO_CODEGEN``; Spark's own default ``FALLBACK`` generates code and interprets only what fails to compile).
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}

#: Spark's size limit for broadcasting the smaller side of a join (each broadcast is a Spark job of its own).
BROADCAST_THRESHOLD = "spark.sql.autoBroadcastJoinThreshold"


def code_generation(spark: Any, settings: SparkSettings, data_bytes: int | None):
    """Interpreted expressions while the block runs when its data is small; the session as it is otherwise.

    Below ``settings.codegen_min_mb`` (``data_bytes`` known) the block runs interpreted: a small epoch's
    queries are planned afresh every epoch and their generated classes differ in their literals, so compiling
    them costs more than evaluating them. Yields ``"interpreted"``, ``"generated"`` (nothing changed), or
    ``"spark.conf"`` when the configuration sets either setting itself.
    """
    return _when_small(spark, settings, INTERPRETED, data_bytes, settings.codegen_min_mb,
                       small="interpreted", otherwise="generated")


def join_strategy(spark: Any, settings: SparkSettings, data_bytes: int | None):
    """Joins by shuffle while the block runs when its data is small; the session as it is otherwise.

    Below ``settings.broadcast_join_min_mb`` (``data_bytes`` known) Spark broadcasts no join side by size
    (the threshold at -1; a ``broadcast()`` hint still broadcasts). In a small epoch every side is under Spark's
    10 MB limit, so every join was a broadcast: a Spark job of its own (collect the side, broadcast it) where a
    shuffle join is a stage of the job that needs it; the full example at 5k events ran 20 jobs a warm epoch
    instead of 12. Yields ``"shuffle"``, ``"auto"`` (nothing changed: Spark's size rule), or ``"spark.conf"``.
    """
    return _when_small(spark, settings, {BROADCAST_THRESHOLD: "-1"}, data_bytes, settings.broadcast_join_min_mb,
                       small="shuffle", otherwise="auto")


@contextlib.contextmanager
def checksum_files(spark: Any, settings: SparkSettings, write: bool):
    """Delta's version checksum files written by the block's commits when ``write``; the session as it is otherwise.

    A JVM that opens a table at a version without its checksum file reconstructs the version's protocol and
    metadata with a Spark job, and the state after its first commit with more (three or four jobs a table, half a
    second or more); with the file it reads them from it. Within a process Delta carries a table's state from one
    commit to the next in memory, so the files are written only where a new process will start: by a run's last
    epoch. Yields ``True`` (written), ``False`` (the session as it is) or ``"spark.conf"`` when the configuration
    sets the key itself (then it is left alone).
    """
    if CHECKSUM_FILES in settings.conf:
        yield "spark.conf"
        return
    if not write:
        yield False
        return
    with _session_values(spark, {CHECKSUM_FILES: "true"}):
        yield True


@contextlib.contextmanager
def _when_small(spark: Any, settings: SparkSettings, values: Mapping[str, str], data_bytes: int | None,
                min_mb: float, *, small: str, otherwise: str):
    """``values`` while the block runs when ``data_bytes`` is known and below ``min_mb``, yielding ``small``;
    the session as it is, yielding ``otherwise``; ``"spark.conf"`` when the configuration sets any of the keys."""
    if any(key in settings.conf for key in values):
        yield "spark.conf"
        return
    if data_bytes is None or data_bytes >= min_mb * _MB:
        yield otherwise
        return
    with _session_values(spark, values):
        yield small


@contextlib.contextmanager
def _session_values(spark: Any, values: Mapping[str, str]):
    """The session's runtime settings at ``values`` while the block runs, its own values back after it."""
    before = {key: spark.conf.get(key) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
