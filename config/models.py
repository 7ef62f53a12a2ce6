"""The settings models: one frozen, strict pydantic model per section of the YAML file.

Every field has a description; ``epochal.config.docs`` turns them into docs/configuration.md.
"""

from __future__ import annotations

import dataclasses
import os

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator

from epochal.config.fields import (
    Bool,
    Float,
    Host,
    Int,
    LocalPath,
    Location,
    Name,
    PipelineRef,
    NonNegativeDuration,
    PositiveDuration,
    SparkConf,
    SparkMaster,
    JvmMemory,
    TypeLabel,
    UtcDatetime,
)
from epochal.config.paths import join_location, resolve_path


class _Strict(BaseModel):
    """Base of every settings model: immutable, unknown keys refused, no NaN/inf."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, validate_default=True)


class CheckpointMode(str, Enum):
    """How a checkpoint stores state: references to Delta versions, or a full copy."""

    INCREMENTAL = "incremental"
    FULL = "full"


class Jit(str, Enum):
    """Which compilers the driver's JVM runs (HotSpot's tiered compilation, or its quick C1 compiler alone)."""

    AUTO = "auto"
    TIERED = "tiered"
    QUICK = "quick"


class Gc(str, Enum):
    """The driver JVM's garbage collector: HotSpot's throughput collector, or the one the JVM picks itself."""

    PARALLEL = "parallel"
    JVM = "jvm"


class Granularity(str, Enum):
    """The width of one epoch (one time-window partition)."""

    HOURLY = "hourly"
    DAILY = "daily"


class SparkSettings(_Strict):
    """The SparkSession every epoch runs in (one per run)."""

    master: SparkMaster = Field(default="local[*]", description="Spark master URL.")
    parallelism: Int = Field(
        default=2, ge=1, description="Parallelism of the pipeline (operator-state subtasks, default Spark parallelism)."
    )
    max_parallelism: Int = Field(
        default=128,
        ge=1,
        le=32768,
        description="Number of key groups keyed state is split into; the largest parallelism a restore can rescale to. "
        "A pipeline built with its own `max_parallelism` fixes it: set here to another value than 128, it must be the "
        "same (else refused).",
    )
    shuffle_partitions: Int | None = Field(
        default=None,
        ge=1,
        description="spark.sql.shuffle.partitions; null means max(parallelism, local cores).",
    )
    ui_enabled: Bool = Field(default=False, description="Start the Spark web UI.")
    driver_memory: JvmMemory = Field(default="2g", description="spark.driver.memory, e.g. 512m, 2g.")
    codegen_min_mb: Float = Field(
        default=8,
        ge=0,
        description=(
            "Spark generates and compiles Java code for an epoch only when its data (the sources' planned files plus "
            "the state at the last checkpoint) reaches this many MB, or its size is unknown; smaller epochs evaluate "
            "expressions interpreted, without the compile time that dominates them. 0: always generate code."
        ),
    )
    broadcast_join_min_mb: Float = Field(
        default=8,
        ge=0,
        description=(
            "Spark broadcasts the smaller side of a join by its size (spark.sql.autoBroadcastJoinThreshold) only in "
            "an epoch whose data (the sources' planned files plus the state at the last checkpoint) reaches this many "
            "MB, or whose size is unknown; smaller epochs join by shuffle, saving a Spark job per join. A broadcast() "
            "hint still broadcasts. 0: always as Spark decides."
        ),
    )
    state_rewrite_below_mb: Float = Field(
        default=4,
        ge=0,
        description=(
            "A keyed state table of at most this many MB is rewritten whole by a state write (one Spark job) instead "
            "of MERGEd (about 18 Spark jobs however small the table); a larger one is MERGEd, so that an epoch writes "
            "bytes in proportion to the keys it changed. 0: always MERGE."
        ),
    )
    sink_rewrite_below_mb: Float = Field(
        default=4,
        ge=0,
        description=(
            "An upsert sink of at most this many MB takes an epoch's rows in one rewrite of the table (one Spark job), "
            "committed as the MERGE it is (its predicate, clauses and row metrics), instead of Delta's MERGE (six Spark "
            "jobs however small the table). Sinks with a change data feed or row tracking are always MERGEd. "
            "0: always MERGE."
        ),
    )
    jit: Jit = Field(
        default=Jit.AUTO,
        description=(
            "The driver JVM's compilers. tiered: HotSpot's default (C1, then C2 for hot code: fastest after a few "
            "epochs). quick: C1 alone, which compiles a fraction as much: a process that runs one or two small "
            "epochs ends sooner (a scheduled run). auto: quick for a run of at most two epochs whose state at the "
            "last checkpoint is below codegen_min_mb, or of at most eight whose sources' files total under 1 MB "
            "(a source that cannot say counts as large), tiered otherwise. The driver only; executors keep their own."
        ),
    )
    gc: Gc = Field(
        default=Gc.PARALLEL,
        description=(
            "The driver JVM's garbage collector. parallel: HotSpot's throughput collector (-XX:+UseParallelGC), "
            "which spends less CPU than G1's concurrent marking and write barriers: a warm epoch of the example "
            "about a fifth faster on two cores. jvm: the JVM's own choice (G1 on a machine of two cores and 2 GB "
            "or more). A collector named in spark.conf's driver Java options or in JAVA_TOOL_OPTIONS wins. The "
            "driver only (in local mode, also the tasks); executors keep their own."
        ),
    )
    conf: SparkConf = Field(
        default_factory=dict,
        description="Extra Spark properties, applied last (they override everything above).",
    )

    @field_validator("max_parallelism")
    @classmethod
    def _max_covers_parallelism(cls, value: int, info: ValidationInfo) -> int:
        """max_parallelism bounds parallelism: it is the number of key groups."""
        parallelism = info.data.get("parallelism")
        if parallelism is not None and value < parallelism:
            raise ValueError(f"must be >= spark.parallelism ({parallelism})")
        return value


class CheckpointSettings(_Strict):
    """Checkpointing: where checkpoints live, how often they are taken, how many are kept."""

    dir: Location = Field(
        default="data/checkpoints",
        description="Checkpoint storage root (path or fsspec URL): chk-<id>/_metadata, shared/, savepoints/.",
    )
    savepoints_dir: Location | None = Field(
        default=None,
        description="Where savepoints are written; null means <checkpoints.dir>/savepoints.",
    )
    retain: Int = Field(default=3, ge=1, description="Completed checkpoints to keep; older ones are subsumed.")
    interval_epochs: Int = Field(default=1, ge=1, description="Take a checkpoint every this many epochs.")
    timeout_s: Float = Field(
        default=600, gt=0, description="Seconds a pending checkpoint may wait for its acks before it expires."
    )
    tolerable_failures: Int = Field(
        default=0, ge=0, description="Consecutive failed checkpoints tolerated before the pipeline fails."
    )
    mode: CheckpointMode = Field(
        default=CheckpointMode.INCREMENTAL,
        description="incremental: reference Delta table versions; full: copy every state table.",
    )
    max_concurrent: Int = Field(default=1, ge=1, description="Checkpoints that may be pending at the same time.")
    min_pause_s: Float = Field(
        default=0, ge=0, description="Minimum seconds between the end of one checkpoint and the next trigger."
    )
    stats_history: Int = Field(default=1000, ge=1, description="Checkpoints whose statistics are kept.")
    cleanup_delay_s: Float = Field(
        default=3600,
        ge=0,
        description="Grace period of retention (like VACUUM's): state files and Delta log entries that no retained "
        "checkpoint needs any more are deleted only once they have been unneeded this long, so that a query that "
        "started before the cleanup still finds its files.",
    )
    lease_timeout_s: Float = Field(
        default=120,
        gt=0,
        description="Seconds the lease of a run, restore or savepoint lasts unless renewed (renewed every third of "
        "it and at every epoch): a crashed holder blocks the deployment at most this long (on the same host, "
        "not at all).",
    )

    @property
    def effective_savepoints_dir(self) -> str:
        """The savepoints directory: ``savepoints_dir``, or ``<dir>/savepoints`` when unset."""
        return self.savepoints_dir if self.savepoints_dir is not None else join_location(self.dir, "savepoints")


class PartitionSettings(_Strict):
    """Time-window partitions: one epoch per window, from ``start`` on."""

    granularity: Granularity = Field(default=Granularity.HOURLY, description="Width of a partition window.")
    start: UtcDatetime = Field(
        default=datetime(2026, 11, 1, tzinfo=timezone.utc),
        description="First partition (UTC; a naive time is read as UTC); must be on a window boundary.",
    )

    @field_validator("start")
    @classmethod
    def _aligned(cls, value: datetime, info: ValidationInfo) -> datetime:
        """The start must be on a window boundary of the granularity (in UTC)."""
        granularity = info.data.get("granularity")
        on_hour = value.minute == 0 and value.second == 0 and value.microsecond == 0
        if granularity is Granularity.HOURLY and not on_hour:
            raise ValueError("must be on the hour for hourly partitions (like 2026-11-01T13:00:00Z)")
        if granularity is Granularity.DAILY and not (on_hour and value.hour == 0):
            raise ValueError("must be midnight UTC for daily partitions (like 2026-11-01)")
        return value


class DagsterSettings(_Strict):
    """Dagster: instance directory, webserver, schedule."""

    home: LocalPath | None = Field(
        default=None, description="DAGSTER_HOME (a local directory); null means an ephemeral instance or $DAGSTER_HOME."
    )
    webserver_host: Host = Field(default="127.0.0.1", description="Address `epochal ui` binds the webserver to.")
    webserver_port: Int = Field(default=3000, ge=1, le=65535, description="Port of the Dagster webserver.")
    schedule_enabled: Bool = Field(default=True, description="Start the per-window schedule running.")
    savepoint_every_checkpoints: Int | None = Field(
        default=None, ge=1,
        description="The savepoint sensor takes a savepoint every N completed checkpoints; null: only on request or code change.",
    )
    backfill_chunk: Int | None = Field(
        default=None, ge=1,
        description="A backfill runs as runs of this many partitions (each one SparkSession, epochs in order); "
                    "null: the whole range in one run.",
    )


_M = TypeVar("_M", bound=BaseModel)


class Settings(_Strict):
    """A deployment's whole configuration (the YAML file's top level)."""

    _origin: str | None = PrivateAttr(default=None)  # the file it was loaded from, for error messages
    _lines: dict[tuple[str, ...], int] = PrivateAttr(default_factory=dict)  # the file's line of each key, likewise

    def __eq__(self, other: object) -> bool:  # the same settings, wherever they were loaded from
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(self.model_dump_json())

    pipeline: PipelineRef = Field(
        default="clickstream",
        description="The pipeline to run: a built-in name (clickstream), a name an installed package registers "
        "(entry points `epochal.pipelines`), or an import path `package.module:factory` (`factory(settings)` "
        "returns a Pipeline, or the attribute is one).",
    )
    landing: Location = Field(default="data/landing", description="Input root (path or fsspec URL).")
    warehouse: Location = Field(default="data/warehouse", description="Output root: one Delta table per sink.")
    checkpoints: CheckpointSettings = Field(default_factory=CheckpointSettings, description="Checkpointing.")
    partitions: PartitionSettings = Field(default_factory=PartitionSettings, description="Time-window partitions.")
    spark: SparkSettings = Field(default_factory=SparkSettings, description="Spark session.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="The pipeline's own options, validated by the pipeline (the clickstream example: "
        "dedupe_ttl, session_gap, allowed_lateness).",
    )
    dagster: DagsterSettings = Field(default_factory=DagsterSettings, description="Dagster.")

    def resolve_paths(self, base: str | Path, *, per_key: Mapping[str, str | Path] | None = None) -> Settings:
        """A copy with every relative plain path made absolute (see ``epochal.config.paths``).

        ``base`` is the directory relative paths are taken from; ``per_key`` gives
        another base for some dotted keys (the loader uses it for values set by
        environment variables, which are relative to the working directory).
        """
        per_key = per_key or {}
        updates: dict[tuple[str, ...], str] = {}
        for key in path_keys():
            value = self.get(key)
            if isinstance(value, str):
                updates[tuple(key.split("."))] = resolve_path(value, per_key.get(key, base))
        return _with_updates(self, updates)

    def set_by(self, key: str) -> str | None:
        """Where a dotted key's value came from, for error messages: its ``EPOCHAL__*`` variable when the
        environment sets it (it overrides the file), else the configuration file (None when neither is known)."""
        from epochal.config.loader import env_var_name

        name = env_var_name(key)
        return f"environment variable {name}" if name in os.environ else self._origin

    def pipeline_options(self, model: type[_M]) -> _M:
        """The pipeline's ``options`` validated by its own pydantic model: a ConfigError naming
        ``options.<key>`` (and the configuration file) for a bad or unknown option."""
        from epochal.config.errors import ConfigError, issues_from_validation

        fields = set(model.model_fields)
        # Environment variables name keys in any case (EPOCHAL__OPTIONS__SESSION_GAP).
        options = {(k.lower() if k not in fields and k.lower() in fields else k): v for k, v in self.options.items()}
        try:
            return model.model_validate(options)
        except ValidationError as exc:
            def located(key: tuple[str, ...]) -> tuple[str | None, int | None]:  # the variable, else file and line
                from epochal.config.loader import env_var_name, line_of

                path = ("options", *key)
                if key and (name := env_var_name(".".join(path))) in os.environ:
                    return name, None
                return self._origin, line_of(self._lines, path)
            issues = [
                dataclasses.replace(
                    issue,
                    key=f"options.{issue.key}" if issue.key else "options",
                    message=issue.message.replace(f"key '{issue.key}'", f"key 'options.{issue.key}'", 1)
                    + f" (an option of pipeline {self.pipeline!r})",
                )
                for issue in issues_from_validation(exc, model, located)
            ]
            raise ConfigError.from_issues(issues) from None

    def storage_locations(self) -> tuple[str, ...]:
        """Where data lives: landing, warehouse, checkpoints and (when set) savepoints."""
        locations = (self.landing, self.warehouse, self.checkpoints.dir, self.checkpoints.savepoints_dir)
        return tuple(location for location in locations if location)

    def get(self, key: str) -> Any:
        """The value at a dotted key such as ``checkpoints.retain``; KeyError if there is none."""
        node: Any = self
        for part in key.split("."):
            if not isinstance(node, BaseModel) or part not in type(node).model_fields:
                raise KeyError(key)
            node = getattr(node, part)
        return node


SECTIONS: tuple[type[_Strict], ...] = (
    Settings,
    CheckpointSettings,
    PartitionSettings,
    SparkSettings,
    DagsterSettings,
)


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The settings model an annotation refers to (a nested section), or None for a leaf."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def iter_fields(model: type[BaseModel] = Settings, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf field as ``(dotted key, FieldInfo)``, sections expanded, in declaration order."""
    for name, info in model.model_fields.items():
        nested = section_model(info.annotation)
        if nested is not None:
            yield from iter_fields(nested, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def type_label(info: Any) -> TypeLabel | None:
    """The TypeLabel attached to a field (directly or inside ``X | None``), if any."""
    for meta in info.metadata:
        if isinstance(meta, TypeLabel):
            return meta
    for arg in get_args(info.annotation):
        for meta in getattr(arg, "__metadata__", ()):
            if isinstance(meta, TypeLabel):
                return meta
    return None


def path_keys() -> tuple[str, ...]:
    """Dotted keys of every location field (the ones relative-path resolution applies to)."""
    return tuple(key for key, info in iter_fields() if (label := type_label(info)) is not None and label.path)


def _with_updates(model: BaseModel, updates: Mapping[tuple[str, ...], Any]) -> Any:
    """A copy of a frozen model with values replaced at nested field paths."""
    own = {path[0]: value for path, value in updates.items() if len(path) == 1}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for path, value in updates.items():
        if len(path) > 1:
            nested.setdefault(path[0], {})[path[1:]] = value
    for name, sub in nested.items():
        own[name] = _with_updates(getattr(model, name), sub)
    return model.model_copy(update=own)
