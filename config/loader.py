"""Load Settings from one YAML file plus ``EPOCHAL__*`` environment overrides.

Rules
-----
* No path: the built-in defaults. A path that does not exist is an error naming it.
  An empty file means the defaults; a section left empty (``checkpoints:``) too.
* Scalars are read as in YAML 1.2: only ``true``/``false`` are booleans (``on``,
  ``yes``, ``no`` stay strings) and ``1:30`` or ``010`` are not numbers.
* Environment: ``EPOCHAL__<KEY>[__<SUBKEY>...]=value`` overrides the file, e.g.
  ``EPOCHAL__CHECKPOINTS__RETAIN=5``. Names are case-insensitive; an unknown key
  is an error naming the variable. Each value is read as one YAML scalar
  (``5`` -> 5, ``true`` -> True) and then validated; a string field keeps the
  text as written. A section may be given whole as a YAML flow mapping
  (``EPOCHAL__SPARK__CONF='{spark.sql.ansi.enabled: "false"}'``); a key below a
  mapping field keeps its case (``EPOCHAL__SPARK__CONF__spark.ui.port=4050``).
  An empty value sets a field that may be null to null.
* Relative plain paths become absolute: against the file's directory for values
  from the file and for defaults, against the working directory for values from
  the environment or when no file is given (see ``epochal.config.paths``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from epochal.config.errors import ConfigError, ConfigIssue, issues_from_validation, unknown_key_message
from epochal.config.models import Settings, path_keys, section_model
from epochal.config.paths import url_scheme

ENV_PREFIX = "EPOCHAL__"
ENV_DELIMITER = "__"

KeyPath = tuple[str, ...]


# --------------------------------------------------------------------------- YAML


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema booleans, integers and floats."""


_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"

_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL_TAG, _INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Yaml12Loader.add_implicit_resolver(_INT_TAG, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_Yaml12Loader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)
_Yaml12Loader.add_constructor(_INT_TAG, lambda loader, node: int(loader.construct_scalar(node), 10))


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """A YAML date or time, or its text where it names none (``2026-13-01``): the key's own check then names the
    key, the value and its line, instead of PyYAML's bare ``month must be in 1..12``."""
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError:
        return loader.construct_scalar(node)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)


def parse_yaml(text: str) -> Any:
    """Parse YAML text with the loader the configuration uses (YAML 1.2 scalars)."""
    return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


@dataclass
class _FileData:
    """A parsed configuration file: its data, where each key is, and its problems."""

    data: dict[str, Any] = field(default_factory=dict)
    lines: dict[KeyPath, int] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)


def read_config_file(path: Path, source: str) -> _FileData:
    """Read and parse one YAML configuration file; raise ConfigError if it cannot be read."""
    if not path.exists():
        raise ConfigError("no such file", source=source)
    if path.is_dir():
        raise ConfigError("is a directory, not a YAML file", source=source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the file: {exc}", source=source) from exc
    try:
        data = parse_yaml(text)
        root = yaml.compose(text, Loader=_Yaml12Loader)
    except yaml.YAMLError as exc:
        raise _yaml_syntax_error(exc, source) from exc
    if data is None:
        return _FileData()
    if not isinstance(data, dict):
        raise ConfigError(
            f"the file must hold a mapping of keys (like 'checkpoints:'), not a {type(data).__name__}", source=source
        )
    result = _FileData(data=data)
    if root is not None:
        _index_keys(root, (), result, source)
    return result


def _yaml_syntax_error(exc: yaml.YAMLError, source: str) -> ConfigError:
    """A ConfigError giving the line and column of a YAML syntax error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return ConfigError(f"invalid YAML: {problem}", source=source)
    return ConfigError(f"invalid YAML at column {mark.column + 1}: {problem}", source=source, line=mark.line + 1)


def _index_keys(node: yaml.Node, prefix: KeyPath, result: _FileData, source: str) -> None:
    """Record the line of every key under ``node``; report keys written twice."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key, line = str(key_node.value), key_node.start_mark.line + 1
        path = (*prefix, key)
        if key in seen:
            result.issues.append(
                ConfigIssue(
                    f"duplicate key '{'.'.join(path)}' (also on line {seen[key]})",
                    key=".".join(path),
                    source=source,
                    line=line,
                    unknown_key=True,
                )
            )
        seen[key] = line
        result.lines[path] = line
        _index_keys(value_node, path, result, source)


def _fill_empty_sections(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """Treat a section written with no keys (``checkpoints:`` -> null) as an empty mapping."""
    out = dict(data)
    for name, info in model.model_fields.items():
        nested = section_model(info.annotation)
        if nested is None or name not in out:
            continue
        if out[name] is None:
            out[name] = {}
        elif isinstance(out[name], dict):
            out[name] = _fill_empty_sections(out[name], nested)
    return out


# --------------------------------------------------------------------------- environment


@dataclass
class _EnvData:
    """Overrides read from the environment: nested data, the variable behind each key, problems."""

    data: dict[str, Any] = field(default_factory=dict)
    sources: dict[KeyPath, str] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)


def env_var_name(key: str) -> str:
    """The environment variable that overrides a dotted key (``checkpoints.retain`` -> ``EPOCHAL__CHECKPOINTS__RETAIN``)."""
    return ENV_PREFIX + ENV_DELIMITER.join(part.upper() for part in key.split("."))


def read_env_overrides(env: Mapping[str, str]) -> _EnvData:
    """Collect every ``EPOCHAL__*`` variable into nested data; unknown keys become issues."""
    result = _EnvData()
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        target = _locate_env_key(name)
        if isinstance(target, ConfigIssue):
            result.issues.append(dataclasses.replace(target, value=env[name]))
            continue
        path, annotation = target
        if path in result.sources:
            result.issues.append(
                ConfigIssue(
                    f"{'.'.join(path)} is set twice, by {result.sources[path]} and {name}",
                    key=".".join(path),
                    source=name,
                    unknown_key=True,
                )
            )
            continue
        result.sources[path] = name
        _set_nested(result.data, path, env_value(env[name], annotation))
    return result


def _locate_env_key(name: str) -> tuple[KeyPath, Any] | ConfigIssue:
    """The key path and field annotation an environment variable names, or the issue with it."""
    parts = name[len(ENV_PREFIX) :].split(ENV_DELIMITER)
    if not all(parts):
        return ConfigIssue(
            f"malformed variable name: expected {ENV_PREFIX}<KEY>[{ENV_DELIMITER}<SUBKEY>...]", source=name, unknown_key=True
        )
    model: type[BaseModel] = Settings
    path: list[str] = []
    for index, part in enumerate(parts):
        lowered = part.lower()
        info = model.model_fields.get(lowered)
        if info is None:
            key = [*path, lowered]
            return ConfigIssue(unknown_key_message(Settings, key), key=".".join(key), source=name, unknown_key=True)
        path.append(lowered)
        nested = section_model(info.annotation)
        if nested is not None:
            model = nested
            continue
        rest = parts[index + 1 :]
        if not rest:
            return tuple(path), info.annotation
        if _is_mapping(info.annotation):
            key = ENV_DELIMITER.join(rest)
            # Spark properties keep their case; a pipeline's options are field names (lower case).
            return (*path, key.lower() if path == ["options"] else key), _mapping_value_type(info.annotation)
        key = [*path, rest[0].lower()]
        return ConfigIssue(unknown_key_message(Settings, key), key=".".join(key), source=name, unknown_key=True)
    return tuple(path), model


def env_value(raw: str, annotation: Any) -> Any:
    """Read one environment value as a YAML scalar, as the field it is for expects.

    A string field keeps the text as written; an empty value means null where null is
    allowed; mappings and lists are only kept for mapping fields and sections.
    """
    if raw == "":
        return None if _allows_none(annotation) else ""
    try:
        parsed = parse_yaml(raw)
    except yaml.YAMLError:
        return raw
    if _accepts_str(annotation) and not isinstance(parsed, str) and parsed is not None:
        return raw
    if isinstance(parsed, (dict, list)) and not (_is_mapping(annotation) or section_model(annotation)):
        return raw
    return parsed


def _unwrap(annotation: Any) -> tuple[Any, ...]:
    """The member types of ``X | None`` / ``Union[...]`` / ``Annotated[X, ...]``, as a flat tuple."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(member for arg in get_args(annotation) for member in _unwrap(arg))
    if hasattr(annotation, "__metadata__"):
        return _unwrap(get_args(annotation)[0])
    return (annotation,)


def _accepts_str(annotation: Any) -> bool:
    """True if the field is a string field (possibly nullable)."""
    return str in _unwrap(annotation)


def _allows_none(annotation: Any) -> bool:
    """True if the field may be null."""
    return type(None) in _unwrap(annotation)


def _is_mapping(annotation: Any) -> bool:
    """True if the field is a mapping leaf such as ``spark.conf``."""
    return any(get_origin(member) is dict for member in _unwrap(annotation))


def _mapping_value_type(annotation: Any) -> Any:
    """The value type of a mapping field (``dict[str, str]`` -> ``str``)."""
    for member in _unwrap(annotation):
        if get_origin(member) is dict:
            return get_args(member)[1]
    return Any


def _set_nested(data: dict[str, Any], path: KeyPath, value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value``, creating mappings on the way."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


# --------------------------------------------------------------------------- merge and load


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two nested mappings; ``override`` wins."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _covered(path: KeyPath, sources: Mapping[KeyPath, str]) -> str | None:
    """The environment variable that set ``path`` or one of its sections, if any."""
    for end in range(len(path), 0, -1):
        if path[:end] in sources:
            return sources[path[:end]]
    return None


def line_of(lines: Mapping[KeyPath, int], key: KeyPath) -> int | None:
    """The file's line of ``key``, else of its nearest parent in the file (a value set as a whole section)."""
    return next((lines[key[:end]] for end in range(len(key), 0, -1) if key[:end] in lines), None)


def load_settings(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> Settings:
    """Load the settings: defaults, then the YAML file at ``path``, then ``EPOCHAL__*`` variables.

    ``env`` defaults to ``os.environ``. Raises ConfigError listing every problem found.
    """
    env = os.environ if env is None else env
    source = str(path) if path is not None else None
    file_path = Path(path).expanduser() if path is not None else None
    file = read_config_file(file_path, str(path)) if file_path is not None else _FileData()
    overrides = read_env_overrides(env)
    merged = merge(_fill_empty_sections(file.data, Settings), overrides.data)

    def locate(key: KeyPath) -> tuple[str | None, int | None]:
        """Where the value at ``key`` came from: (env var, None) or (file, line)."""
        variable = _covered(key, overrides.sources)
        if variable is not None:
            return variable, None
        line = line_of(file.lines, key)
        # Variables that set entries inside this key (EPOCHAL__SPARK__CONF__<property> for spark.conf).
        inside = sorted(name for path, name in overrides.sources.items() if len(path) > len(key) and path[: len(key)] == key)
        if inside:
            return (" and ".join(inside) + (f" (or {source})" if key in file.lines else "")), None
        return source, line

    issues = [*file.issues, *overrides.issues]
    settings = None
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        issues.extend(issues_from_validation(exc, Settings, locate))
    if issues or settings is None:
        raise ConfigError.from_issues(issues)
    cwd = Path.cwd()
    base = file_path.absolute().parent if file_path is not None else cwd
    per_key = {key: cwd for key in path_keys() if _covered(tuple(key.split(".")), overrides.sources)}
    resolved = settings.resolve_paths(base, per_key=per_key)
    if blocked := _files_in_the_way(resolved, locate):
        raise ConfigError.from_issues(blocked)
    resolved._origin, resolved._lines = source, dict(file.lines)
    return resolved


def _files_in_the_way(settings: Settings, locate) -> list[ConfigIssue]:
    """A local folder setting whose path, or a parent of it, is a file: every write under it would fail later,
    half-way through a run, with the operating system's bare "Not a directory"."""
    issues = []
    for key in path_keys():
        value = settings.get(key)
        if not isinstance(value, str) or url_scheme(value) not in (None, "file", "local"):
            continue
        path = Path(value.split("://", 1)[1] if "://" in value else value)
        blocking = next((p for p in (path, *path.parents) if p.exists() or p.is_symlink()), None)
        if blocking is not None and not blocking.is_dir():
            what = "is a file" if blocking == path else f"is under {blocking}, which is a file"
            file, line = locate(tuple(key.split(".")))
            issues.append(ConfigIssue(f"{what}, not a folder: give a folder",
                                      key=key, value=value, source=file, line=line))
    return issues
