"""Where an epoch's time goes: seconds, Spark jobs and generated classes per named step (``EpochReport.steps``).

The steps are those of :class:`epochal.pipeline.epoch.EpochTransaction`: ``begin`` (progress and
checkpoint trigger), ``plan``, ``stage:<name>`` (its ``process`` call: frames are lazy, so this is
the stage's own keyed-state writes and whatever it persists or computes eagerly), ``state:<name>``
(``snapshot_state``, operator state write, acknowledgement), ``sink:<name>`` (the sink's write,
where the lazy frames are computed), ``complete``, ``retain`` and ``done``.

While a step runs, its Spark jobs run in a job group of their own (``epochal-<run>-e<epoch>-<step>``)
with a description naming the epoch and the step, and every Delta commit it makes carries the same
text as its ``userMetadata`` (``DESCRIBE HISTORY`` and delta-rs's ``history()`` show which epoch and
step wrote each version). The jobs are counted once, at the end, from Spark's status tracker, which
works with the UI off. The step's label is also Spark's call site of its jobs and stages (the UI lists them
by it). The previous group, description, call site and user metadata are put back afterwards.

``compiled`` counts the classes Spark generated and compiled (Janino) in the driver's JVM while the step ran
(Spark's ``CodegenMetrics``; in local mode the executors share that JVM). A warm epoch that compiles
hundreds is paying seconds for code it compiled before (see ``spark.sql.codegen.cache.maxEntries`` in
:mod:`epochal.state.session`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

_GROUP, _DESCRIPTION = "spark.jobGroup.id", "spark.job.description"
#: Spark's call site properties: set, they name the step in the UI's job and stage lists, and Spark takes them
#: instead of walking the driver thread's stack for every RDD and query it creates (some 10% of the driver's
#: time in a small epoch).
_CALL_SITE = ("callSite.short", "callSite.long")
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def step_label(epoch: int, partition: str, step: str) -> str:
    """The text of a step's job description and of its Delta commits' ``userMetadata``."""
    return f"epochal epoch {epoch} ({partition}): {step}"


def _compilations(spark):
    """Spark's histogram of code-generation compile times in this driver JVM (None: no JVM to ask)."""
    try:
        return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    except Exception:  # noqa: BLE001 - a session without a py4j JVM (Spark Connect): nothing to count
        return None


def compiled_classes(spark) -> int | None:
    """Classes Spark's code generation has compiled in this driver JVM so far (None: no JVM to ask)."""
    histogram = _compilations(spark)
    return None if histogram is None else int(histogram.getCount())


class StepClock:
    """Time the steps of one epoch into ``steps`` (``{step: {"s": seconds, "jobs": spark_jobs, "compiled": classes}}``)."""

    def __init__(self, spark, epoch: int, partition: str, steps: dict[str, dict[str, Any]]) -> None:
        self._spark = spark
        self._sc = spark.sparkContext
        self._compilations = _compilations(spark)  # looked up once: one py4j call per count after that
        self._epoch, self._partition = epoch, partition
        self._group = f"epochal-{uuid.uuid4().hex[:8]}-e{epoch}-"
        self.steps = steps
        self._before: dict[str, str | None] = {}
        self._metadata_before: str | None = None

    def __enter__(self) -> StepClock:
        self._before = {key: self._sc.getLocalProperty(key) for key in (_GROUP, _DESCRIPTION, *_CALL_SITE)}
        self._metadata_before = self._spark.conf.get(USER_METADATA, None)
        return self

    def __exit__(self, *exc: object) -> None:
        for key, value in self._before.items():
            self._sc.setLocalProperty(key, value)  # None removes the property
        if self._metadata_before is None:
            self._spark.conf.unset(USER_METADATA)
        else:
            self._spark.conf.set(USER_METADATA, self._metadata_before)

    def count_jobs(self) -> int:
        """Record each step's Spark jobs in ``steps``; return the epoch's total."""
        tracker = self._sc.statusTracker()
        for name, entry in self.steps.items():
            entry["jobs"] = len(tracker.getJobIdsForGroup(self.job_group(name)))
        return sum(entry["jobs"] for entry in self.steps.values())

    def job_group(self, step: str) -> str:
        """The Spark job group of a step's jobs."""
        return self._group + step

    def _compiled(self) -> int:
        return 0 if self._compilations is None else int(self._compilations.getCount())

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        label = step_label(self._epoch, self._partition, name)
        self._sc.setLocalProperty(_GROUP, self.job_group(name))
        self._sc.setLocalProperty(_DESCRIPTION, label)
        for key in _CALL_SITE:
            self._sc.setLocalProperty(key, label)
        self._spark.conf.set(USER_METADATA, label)
        compiled = self._compiled()
        started = time.monotonic()
        try:
            yield
        finally:
            entry = self.steps.setdefault(name, {"s": 0.0, "jobs": 0, "compiled": 0})
            entry["s"] = round(entry["s"] + time.monotonic() - started, 3)
            entry["compiled"] += self._compiled() - compiled
