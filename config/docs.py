"""Generate the configuration reference (docs/configuration.md) from the settings models.

    python -m epochal.config.docs > docs/configuration.md
"""

from __future__ import annotations

import sys
from enum import Enum
from types import UnionType
from typing import Any, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from epochal.config.loader import env_var_name
from epochal.config.models import Settings, section_model, type_label
from epochal.config.paths import KNOWN_SCHEMES

_INTRO = """\
# Configuration reference

<!-- Generated from config/models.py by `python -m epochal.config.docs > docs/configuration.md`; do not edit. -->

One YAML file configures a deployment (`--config PATH`; `config/example.yaml` is a
commented example with every key). Every key is optional: a missing key takes
its default, and a file is not needed at all. An unknown key or a bad value is
an error naming the key, the value and what is allowed.

**Environment overrides.** `EPOCHAL__<KEY>__<SUBKEY>=value` overrides the file,
e.g. `EPOCHAL__CHECKPOINTS__RETAIN=5`, `EPOCHAL__SPARK__MASTER=local[2]`.
Names are case-insensitive; a variable with the prefix that names no key is an
error. The value is read as a YAML scalar (`5`, `true`, `2026-11-01`) and
validated like a value in the file; string keys take the text as written. An
empty value sets a key that may be `null` to `null`. A whole section or mapping
may be given as a YAML flow mapping (`EPOCHAL__SPARK__CONF='{spark.ui.port: "4050"}'`),
and one entry of a mapping by name (`EPOCHAL__SPARK__CONF__spark.ui.port=4050`,
the entry name keeps its case).

**YAML.** Scalars follow YAML 1.2: only `true`/`false` are booleans (`yes`,
`on` stay strings) and `1:30` or `010` are not numbers. A boolean key takes
only `true` or `false` (`yes`, `on`, `1`, `no`, `off`, `0` are errors), in the
file and in environment variables alike; a number key takes a number, or a quoted
number as its text (`retain: "5"` is 5), never `true` or `false`.

**Paths.** `landing`, `warehouse`, `checkpoints.dir`, `checkpoints.savepoints_dir`
are plain paths or fsspec URLs with one of the schemes {schemes}.
`dagster.home` is a local path. `~` is expanded. A relative plain path is made
absolute against the directory of the configuration file for values in the file
and for defaults, and against the working directory for values from environment
variables or when no file is given.

**Durations** are written `30m`, `1h30m`, `7d`, `90s`, `500ms` (units w, d, h, m, s, ms, us),
as ISO-8601 durations (`PT30M`, `P7D`) or as a number of seconds.

**Datetimes** are `2026-11-01` (midnight UTC) or ISO-8601 (`2026-11-01T13:00:00Z`);
a time without an offset is UTC.
"""

_BOUNDS = ((annotated_types.Ge, "ge", ">="), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "<="), (annotated_types.Lt, "lt", "<"))
_BASIC = {bool: "boolean", int: "integer", float: "number", str: "string"}


def render_configuration_markdown() -> str:
    """The whole reference: rules, then one table per section with every key."""
    schemes = ", ".join(f"`{scheme}://`" for scheme in sorted(KNOWN_SCHEMES))
    parts = [_INTRO.replace("{schemes}", schemes)]
    defaults = Settings().model_dump(mode="json")
    parts.append(_section_table("Top level", Settings, "", defaults))
    for name, info in Settings.model_fields.items():
        nested = section_model(info.annotation)
        if nested is not None:
            parts.append(_section_table(f"`{name}`", nested, f"{name}.", defaults[name]))
    return "\n".join(parts)


def _section_table(title: str, model: type[BaseModel], prefix: str, defaults: dict[str, Any]) -> str:
    """A heading, the section's docstring and a table of its leaf keys."""
    lines = [f"## {title}", "", _first_paragraph(model.__doc__), ""]
    lines.append("| Key | Type | Default | Environment variable | Description |")
    lines.append("|---|---|---|---|---|")
    for name, info in model.model_fields.items():
        if section_model(info.annotation) is not None:
            continue
        key = f"{prefix}{name}"
        cells = [f"`{key}`", describe_type(info), f"`{_yaml_scalar(defaults[name])}`", f"`{env_var_name(key)}`", info.description or ""]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def describe_type(info: FieldInfo) -> str:
    """A field's type as a user writes it, with its bounds (``integer >= 1``, ``duration or null``)."""
    label = type_label(info)
    members = [arg for arg in _members(info.annotation) if arg is not type(None)]
    if label is not None:
        text = label.name
    elif len(members) == 1 and isinstance(members[0], type) and issubclass(members[0], Enum):
        text = " or ".join(f"`{item.value}`" for item in members[0])
    else:
        text = " or ".join(_BASIC.get(member, getattr(member, "__name__", str(member))) for member in members)
    bounds = [f"{symbol} {getattr(meta, attr)}" for meta in _metadata(info) for kind, attr, symbol in _BOUNDS if isinstance(meta, kind)]
    if bounds:
        text += " " + ", ".join(bounds)
    if type(None) in _members(info.annotation):
        text += " or null"
    return text


def _members(annotation: Any) -> tuple[Any, ...]:
    """Members of a union (or the annotation itself), with Annotated wrappers removed."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(_strip(arg) for arg in get_args(annotation))
    return (_strip(annotation),)


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``."""
    return annotation.__origin__ if hasattr(annotation, "__metadata__") else annotation


def _metadata(info: FieldInfo) -> list[Any]:
    """Constraint metadata of a field, including metadata inside ``Annotated[...] | None``."""
    found = list(info.metadata)
    for arg in get_args(info.annotation) if get_origin(info.annotation) in (Union, UnionType) else ():
        found.extend(getattr(arg, "__metadata__", ()))
    return found


def _yaml_scalar(value: Any) -> str:
    """A default value as it would be written in the YAML file."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _cell(text: str) -> str:
    """Escape a table cell: pipes, and ``<`` outside code spans (it would open an HTML tag)."""
    pieces = text.split("`")
    for index in range(0, len(pieces), 2):
        pieces[index] = pieces[index].replace("<", "&lt;")
    return "`".join(pieces).replace("|", "\\|")


def main() -> int:
    """Print the reference to stdout."""
    sys.stdout.write(render_configuration_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
