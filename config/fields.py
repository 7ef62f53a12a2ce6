"""Reusable annotated field types for the settings models: durations, locations, Spark values.

Each type carries a :class:`TypeLabel` so the generated reference
(``epochal.config.docs``) can name it the way a user writes it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, PlainSerializer

from epochal.config.paths import check_local_path, check_location


@dataclass(frozen=True)
class TypeLabel:
    """Documentation marker: how a field type is named in the reference; ``path`` marks locations."""

    name: str
    path: bool = False


# --------------------------------------------------------------------------- numbers


def reject_bool(value: Any) -> Any:
    """Refuse booleans where a number is expected (pydantic would read ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    return value


Int = Annotated[int, BeforeValidator(reject_bool)]
Float = Annotated[float, BeforeValidator(reject_bool)]


def require_bool(value: Any) -> Any:
    """Only a real boolean: YAML's ``true``/``false`` (an environment value is read as a YAML scalar too).

    pydantic would also read ``yes``, ``on``, ``1``, ``off``, ``no``, ``0`` as booleans; YAML 1.2 keeps them
    strings and numbers (docs/configuration.md, "YAML").
    """
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


Bool = Annotated[bool, BeforeValidator(require_bool)]


# --------------------------------------------------------------------------- durations

_UNITS: dict[str, float] = {
    "w": 7 * 86400.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
}
_PART = r"(\d+(?:\.\d+)?)\s*(ms|us|w|d|h|m|s)"
_SHORTHAND = re.compile(rf"^\s*(?:{_PART}\s*)+$", re.IGNORECASE)
_SHORTHAND_PART = re.compile(_PART, re.IGNORECASE)
_NUMBER = re.compile(r"^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*$")

DURATION_HELP = "a duration: 30m, 1h30m, 7d, 90s, 500ms, an ISO-8601 duration (PT30M, P7D) or seconds (1800)"


def parse_duration(value: Any) -> Any:
    """Read shorthand ("30m", "1h30m", "7d") and plain seconds; pass anything else on to pydantic.

    ISO-8601 durations ("PT30M") and "HH:MM:SS" are left for pydantic's own timedelta parser.
    """
    if isinstance(value, bool):
        raise ValueError(f"must be {DURATION_HELP}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"must be {DURATION_HELP}")
        return timedelta(seconds=value)
    if isinstance(value, str):
        if _NUMBER.match(value):
            return timedelta(seconds=float(value))
        if _SHORTHAND.match(value):
            seconds = sum(float(n) * _UNITS[u.lower()] for n, u in _SHORTHAND_PART.findall(value))
            return timedelta(seconds=seconds)
    return value


def format_duration(value: timedelta) -> str:
    """Write a duration in the shorthand :func:`parse_duration` reads back ("7d", "1h30m", "0s")."""
    micros = round(value.total_seconds() * 1_000_000)
    if micros == 0:
        return "0s"
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    out = []
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1000), ("us", 1)):
        count, micros = divmod(micros, size)
        if count:
            out.append(f"{count}{unit}")
    return sign + "".join(out)


def _positive(value: timedelta) -> timedelta:
    """Require a duration > 0."""
    if value <= timedelta(0):
        raise ValueError("must be a positive duration (more than 0s)")
    return value


def _non_negative(value: timedelta) -> timedelta:
    """Require a duration >= 0."""
    if value < timedelta(0):
        raise ValueError("must not be negative")
    return value


_DURATION_META = (
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
)
PositiveDuration = Annotated[timedelta, *_DURATION_META, AfterValidator(_positive), TypeLabel("duration > 0")]
NonNegativeDuration = Annotated[timedelta, *_DURATION_META, AfterValidator(_non_negative), TypeLabel("duration >= 0")]


# --------------------------------------------------------------------------- datetimes

DATETIME_HELP = "a date or datetime like 2026-11-01 or 2026-11-01T00:00:00Z"


def parse_start(value: Any) -> Any:
    """Accept dates (midnight UTC) and ISO strings; refuse numbers (no epoch seconds here)."""
    if isinstance(value, (bool, int, float)):
        raise ValueError(f"must be {DATETIME_HELP}")
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    return value


def as_utc(value: datetime) -> datetime:
    """A naive datetime is taken as UTC; an aware one is converted to UTC."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def format_datetime(value: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` suffix."""
    return as_utc(value).isoformat().replace("+00:00", "Z")


UtcDatetime = Annotated[
    datetime,
    BeforeValidator(parse_start),
    AfterValidator(as_utc),
    PlainSerializer(format_datetime, return_type=str, when_used="json"),
    TypeLabel("datetime (UTC)"),
]


# --------------------------------------------------------------------------- locations

Location = Annotated[str, AfterValidator(check_location), TypeLabel("path or URL", path=True)]
LocalPath = Annotated[str, AfterValidator(check_local_path), TypeLabel("local path", path=True)]


# --------------------------------------------------------------------------- Spark

SPARK_MASTER_HELP = "local, local[N], local[N,F], local[*], spark://host:port, yarn or k8s://..."
_SPARK_MASTER = re.compile(
    r"""^(?:
        local(?:\[(?:\*|[1-9]\d*)(?:\s*,\s*[1-9]\d*)?\])?
      | spark://[^\s:/,]+:\d+(?:,[^\s:/,]+:\d+)*
      | yarn
      | k8s://\S+
    )$""",
    re.VERBOSE,
)


def check_spark_master(value: str) -> str:
    """Require a Spark master URL of a known form."""
    if not _SPARK_MASTER.match(value):
        raise ValueError(f"must look like {SPARK_MASTER_HELP}")
    return value


_JVM_MEMORY = re.compile(r"^[1-9]\d*\s*(?:[kmgtp]b?)?$", re.IGNORECASE)


def check_jvm_memory(value: str) -> str:
    """Require a JVM memory size such as 512m, 2g, 4096 (MiB)."""
    if not _JVM_MEMORY.match(value):
        raise ValueError("must be a JVM memory size like 512m, 2g or 1t")
    return value


def scalar_to_str(value: Any) -> Any:
    """Numbers and booleans become the strings Spark expects ("8", "true"); others pass through."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def check_spark_conf(value: Any) -> Any:
    """Stringify scalar values of a Spark conf mapping (YAML gives ints and booleans)."""
    if isinstance(value, dict):
        return {key: scalar_to_str(item) for key, item in value.items()}
    return value


# Spark properties that hold a credential (fs.s3a.secret.key, fs.s3a.access.key, ...session.token, ...password).
_CREDENTIAL_PROPERTY = re.compile(r"(?i)secret|password|access[._-]?key|session[._-]?token")


def check_conf_keys(value: dict[str, str]) -> dict[str, str]:
    """Refuse empty or blank Spark conf keys, and credentials (they come from the environment only)."""
    for key in value:
        if not key.strip():
            raise ValueError("keys must be non-empty Spark property names such as spark.sql.shuffle.partitions")
        if _CREDENTIAL_PROPERTY.search(key):
            raise ValueError(
                f"{key!r} holds a credential: credentials never go in the configuration (it is copied into "
                "Dagster's run config and logs); set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, "
                "a profile or an instance role in the environment instead"
            )
    return value


SparkMaster = Annotated[str, AfterValidator(check_spark_master), TypeLabel("Spark master URL")]
JvmMemory = Annotated[str, BeforeValidator(scalar_to_str), AfterValidator(check_jvm_memory), TypeLabel("JVM memory size")]
SparkConf = Annotated[
    dict[str, str],
    BeforeValidator(check_spark_conf),
    AfterValidator(check_conf_keys),
    TypeLabel("mapping of Spark property to string"),
]


# --------------------------------------------------------------------------- names

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_name(value: str) -> str:
    """Require an identifier-like name (letters, digits, underscores), as Dagster names are."""
    if not _NAME.match(value):
        raise ValueError("must be a name of letters, digits and underscores, not starting with a digit")
    return value


_PIPELINE_REF = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def check_pipeline_ref(value: str) -> str:
    """A pipeline's name (built in, or registered through the ``epochal.pipelines`` entry points)
    or an import path ``package.module:factory``."""
    if _NAME.match(value) or _PIPELINE_REF.match(value):
        return value
    raise ValueError(
        "must be a pipeline name (letters, digits, underscores) or an import path package.module:factory"
    )


def check_host(value: str) -> str:
    """Require a non-empty host name or address without whitespace."""
    if not value or any(ch.isspace() for ch in value):
        raise ValueError("must be a host name or IP address, without spaces")
    return value


Name = Annotated[str, AfterValidator(check_name), TypeLabel("name")]
PipelineRef = Annotated[str, AfterValidator(check_pipeline_ref), TypeLabel("name or package.module:factory")]
Host = Annotated[str, AfterValidator(check_host), TypeLabel("host")]
