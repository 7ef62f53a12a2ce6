"""ConfigError: every configuration problem, named by key, value, source and what is allowed.

The first line of ``str(error)`` is a complete one-line reason, e.g.::

    config error in epochal.yaml, line 4: checkpoints.retain = 0: must be >= 1

Further problems found in the same load follow on their own lines.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Any, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from epochal.errors import EpochalError
from epochal.config.fields import DATETIME_HELP, DURATION_HELP, format_datetime, format_duration

_MISSING: Any = object()


@dataclass(frozen=True)
class ConfigIssue:
    """One problem: ``key`` (dotted) ``= value``: ``message``, found in ``source`` (file or env var)."""

    message: str
    key: str | None = None
    value: Any = _MISSING
    source: str | None = None
    line: int | None = None
    unknown_key: bool = False

    def render(self) -> str:
        """The one-line description of this problem."""
        where = "config error"
        if self.source:
            where += f" in {self.source}"
        if self.line is not None:
            where += f", line {self.line}"
        if self.unknown_key or self.key is None:
            return f"{where}: {self.message}"
        if self.value is _MISSING:
            return f"{where}: {self.key}: {self.message}"
        return f"{where}: {self.key} = {show_value(redact(self.key, self.value))}: {self.message}"


class ConfigError(EpochalError):
    """A configuration that cannot be used. ``key``, ``value``, ``source``, ``line`` describe the first problem;
    ``issues`` lists them all."""

    def __init__(
        self,
        message: str,
        key: str | None = None,
        value: Any = _MISSING,
        source: str | None = None,
        *,
        line: int | None = None,
    ) -> None:
        self._init([ConfigIssue(message=message, key=key, value=value, source=source, line=line)])

    @classmethod
    def from_issues(cls, issues: Sequence[ConfigIssue]) -> ConfigError:
        """One error reporting several problems (at least one)."""
        if not issues:
            raise ValueError("ConfigError needs at least one issue")
        error = cls.__new__(cls)
        error._init(list(issues))
        return error

    def _init(self, issues: list[ConfigIssue]) -> None:
        """Set the attributes and the exception message from the issues."""
        self.issues: tuple[ConfigIssue, ...] = tuple(issues)
        first = issues[0]
        self.key: str | None = first.key
        self.value: Any = None if first.value is _MISSING else first.value
        self.source: str | None = first.source
        self.line: int | None = first.line
        EpochalError.__init__(self, self._text(), key=self.key, source=self.source, line=self.line)

    def _text(self) -> str:
        """First issue on the first line (with a count of the others), then one line per other issue."""
        lines = [issue.render() for issue in self.issues]
        if len(lines) > 1:
            more = len(lines) - 1
            lines[0] += f" (and {more} more error{'s' if more > 1 else ''})"
        return "\n".join(lines[:1] + [f"  {line}" for line in lines[1:]])

    @property
    def summary(self) -> str:
        """The first line: one reason, fit for a one-line error on stderr."""
        return str(self).splitlines()[0]

    def __reduce__(self) -> tuple[Callable[..., ConfigError], tuple[Any, ...]]:
        """Pickle by issues (the constructor's arguments are not the message)."""
        return (ConfigError.from_issues, (self.issues,))


# --------------------------------------------------------------------------- values


# Keys whose values are never shown (Spark's own spark.redaction.regex, plus "access_key").
SECRET_KEY = re.compile(r"(?i)secret|password|token|access[._-]?key|credential")
REDACTED = "*********(redacted)"


def redact(key: str | None, value: Any) -> Any:
    """``value`` with secrets hidden: all of it under a secret-looking key, else such entries of a mapping."""
    if value is _MISSING:
        return value
    if key is not None and SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(str(k), v) for k, v in value.items()}
    return value


def show_value(value: Any, limit: int = 80) -> str:
    """A short, YAML-like rendering of a configuration value for messages."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, Enum):
        text = repr(value.value)
    elif isinstance(value, timedelta):
        text = format_duration(value)
    elif isinstance(value, datetime):
        text = format_datetime(value) if value.tzinfo is not None else value.isoformat()
    elif isinstance(value, date):
        text = value.isoformat()
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, default=str, sort_keys=False)
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- pydantic errors

_SIMPLE = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping (a section of keys)",
    "model_attributes_type": "must be a mapping (a section of keys)",
    "missing": "is required",
}


def describe_error(error: ErrorDetails) -> str:
    """What is allowed, for one pydantic error (``must be >= 1``, ``must be 'incremental' or 'full'``)."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
    if kind in bounds:
        limit = next(iter(v for k, v in ctx.items() if k in ("ge", "gt", "le", "lt")), "?")
        return f"must be {bounds[kind]} {limit}"
    if kind == "enum":
        return f"must be {ctx.get('expected', 'one of the allowed values')}"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", error["msg"]))
    if kind.startswith(("datetime_", "date_")):
        return f"must be {DATETIME_HELP}"
    if kind.startswith("time_delta"):
        return f"must be {DURATION_HELP}"
    message = str(error["msg"])
    return message[:1].lower() + message[1:]


def key_of(model: type[BaseModel], loc: Iterable[Any]) -> tuple[str, ...]:
    """The dotted-key parts of a pydantic error location.

    Sections are followed down to a leaf field; a mapping leaf (``spark.conf``) keeps
    one more part, its key; union and validator tags pydantic appends are dropped.
    """
    parts: list[str] = []
    current: type[BaseModel] | None = model
    mapping_leaf = False
    for item in loc:
        if current is None:
            if mapping_leaf:
                parts.append(str(item))
            break
        parts.append(str(item))
        info = current.model_fields.get(str(item))
        if info is None:
            break
        annotation = info.annotation
        current = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        mapping_leaf = get_origin(annotation) is dict
    return tuple(parts)


def unknown_key_message(model: type[BaseModel], parts: Sequence[str]) -> str:
    """``unknown key 'a.b' (did you mean 'a.c'?)``, or the allowed keys when nothing is close."""
    parent = model
    for part in parts[:-1]:
        info = parent.model_fields.get(part)
        annotation = info.annotation if info else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return f"unknown key '{'.'.join(parts)}' ('{part}' has no sub-keys)"
        parent = annotation
    prefix = "".join(f"{p}." for p in parts[:-1])
    known = list(parent.model_fields)
    close = difflib.get_close_matches(parts[-1].lower(), known, n=1, cutoff=0.6)
    if close:
        return f"unknown key '{'.'.join(parts)}' (did you mean '{prefix}{close[0]}'?)"
    return f"unknown key '{'.'.join(parts)}' (allowed here: {', '.join(prefix + k for k in known)})"


def issues_from_validation(
    error: ValidationError,
    model: type[BaseModel],
    locate: Callable[[tuple[str, ...]], tuple[str | None, int | None]] = lambda key: (None, None),
) -> list[ConfigIssue]:
    """Turn every pydantic error into a ConfigIssue; ``locate(key)`` gives its (source, line)."""
    issues = []
    for item in error.errors(include_url=False):
        parts = key_of(model, item["loc"])
        source, line = locate(parts)
        key = ".".join(parts) or None
        if item["type"] == "extra_forbidden":
            issues.append(
                ConfigIssue(unknown_key_message(model, parts), key=key, value=item["input"], source=source, line=line, unknown_key=True)
            )
        else:
            issues.append(ConfigIssue(describe_error(item), key=key, value=item.get("input", _MISSING), source=source, line=line))
    return issues


def config_error_from_validation(
    error: ValidationError,
    model: type[BaseModel],
    locate: Callable[[tuple[str, ...]], tuple[str | None, int | None]] = lambda key: (None, None),
) -> ConfigError:
    """A ConfigError listing every problem in a pydantic ValidationError."""
    return ConfigError.from_issues(issues_from_validation(error, model, locate))
