"""The shell lines of the documentation's examples: what each command must be to pass (tests/docs/test_docs.py).

``epochal`` arguments parse with the real parser, ``make`` targets and variables exist, ``docker compose``
services exist, ``dagster`` commands parse with Dagster's parser, ``python -m`` modules import and parse
their arguments; crontab lines have a valid schedule and a checked command.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import runpy
import shlex
import sys
from pathlib import Path

import yaml
from tests.support.dagster_cli import PROGRAMS as DAGSTER_PROGRAMS
from tests.support.dagster_cli import parse_dagster_command
from tests.support.paths import ROOT


# ----------------------------------------------------------------------------- shell lines


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", (ROOT / "Makefile").read_text(), re.M))


def _makefile_recipe(target: str) -> list[str]:
    """The recipe lines (tab-indented, after ``target:``) of a Makefile target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipe: list[str] = []
    inside = False
    for line in lines:
        if re.match(rf"^{re.escape(target)}\s*:(?!=)", line):
            inside = True
        elif inside and line.startswith("\t"):
            recipe.append(line[1:])
        elif inside and line.strip() and not line.startswith("#"):
            break
    return recipe


def _check_make(args: list[str], where: str) -> None:
    goals = [t for t in args if not t.startswith("-") and "=" not in t]
    missing = [t for t in goals if t not in _makefile_targets()]
    assert not missing, f"{where}: no Makefile target(s) {missing}"
    makefile = (ROOT / "Makefile").read_text()
    for assignment in (a for a in args if "=" in a and not a.startswith("-")):
        name, value = assignment.split("=", 1)
        assert re.search(rf"\$[({{]{re.escape(name)}[)}}]", makefile), f"{where}: the Makefile uses no variable {name}"
        for goal in goals:
            for line in _makefile_recipe(goal):
                passed = re.search(rf"-m\s+([\w.]+)\s+(?:[^$]*\s)?\$\({re.escape(name)}\)", line)
                if passed:  # `$(PY) -m MODULE $(VAR)`: the value is the module's arguments
                    _check_python_module(passed.group(1), shlex.split(value), f"{where} ({name})")


def _compose_services() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


_COMPOSE_VALUE_OPTIONS = {"-e", "--env", "-w", "--workdir", "-u", "--user", "--entrypoint", "--name", "-p",
                          "--publish", "-v", "--volume", "--profile", "-f", "--file", "-t", "--timeout", "--tail"}
_COMPOSE_SERVICE_COMMANDS = {"up", "down", "logs", "ps", "build", "pull", "stop", "start", "restart", "rm", "config"}


def _check_epochal(args: list[str], where: str) -> None:
    from epochal.orchestration.cli import build_parser

    try:
        build_parser().parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"{where}: `epochal {shlex.join(args)}` does not parse") from exc


def _check_compose(args: list[str], where: str) -> None:
    assert args, f"{where}: `docker compose` without a command"
    command, rest = args[0], args[1:]
    services = _compose_services()
    positional: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg.startswith("-"):
            i += 2 if arg in _COMPOSE_VALUE_OPTIONS else 1
            continue
        positional = rest[i:]
        break
    if command in {"run", "exec"}:
        assert positional, f"{where}: `docker compose {command}` names no service"
        service, inner = positional[0], positional[1:]
        assert service in services, f"{where}: no service {service!r} in docker-compose.yml"
        spec = services[service]
        if inner[:1] == ["epochal"]:
            _check_epochal(inner[1:], where)
        elif command == "run" and inner and "build" in spec and "entrypoint" not in spec:
            _check_epochal(inner, where)  # the arguments of the image's entrypoint, epochal
    elif command in _COMPOSE_SERVICE_COMMANDS:
        unknown = [s for s in positional if s not in services]
        assert not unknown, f"{where}: no service(s) {unknown} in docker-compose.yml"
    else:
        raise AssertionError(f"{where}: `docker compose {command}` is not a command these docs use")


class _Parsed(Exception):
    """Raised in place of running a module once its arguments have parsed."""


def _check_python_module(module: str, args: list[str], where: str) -> None:
    """``python -m MODULE ARGS``: the module exists, and ARGS parse with its argparse parser."""
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{where}: no module {module}"
    if not args:
        return
    main = importlib.util.find_spec(f"{module}.__main__") if spec.submodule_search_locations else spec
    assert main is not None and main.origin, f"{where}: {module} cannot be run with -m"
    assert "ArgumentParser" in Path(main.origin).read_text(), (
        f"{where}: `python -m {module}` is given arguments, but it has no argparse parser to check them with"
    )
    original, argv = argparse.ArgumentParser.parse_args, sys.argv

    def parse_only(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    argparse.ArgumentParser.parse_args = parse_only
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    except _Parsed:
        return
    except SystemExit as exc:
        if exc.code in (0, None):  # --help
            return
        raise AssertionError(f"{where}: `python -m {module} {shlex.join(args)}` does not parse") from exc
    finally:
        argparse.ArgumentParser.parse_args, sys.argv = original, argv
    raise AssertionError(f"{where}: `python -m {module}` ran without parsing its arguments")


_SEPARATORS = {"|", "||", "&&", ";", "&"}
_REDIRECTIONS = {">", ">>", "<", ">&", "<&", ">|", "&>"}


def shell_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line: split at ``|``, ``&&``, ``;``, without redirections."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)  # comments (#...) are dropped
    commands: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _SEPARATORS:
            commands.append([])
        elif token in _REDIRECTIONS:
            current = commands[-1]
            if current and current[-1].isdigit() and re.search(rf"(?<!\S){current[-1]}{re.escape(token)}", line):
                current.pop()  # the file descriptor of 2> or 2>&1
            i += 1  # the redirection's target
        else:
            commands[-1].append(token)
        i += 1
    return [c for c in commands if c]


def check_command(line: str, where: str) -> None:
    """Check one shell command line of an example (see the module docstring)."""
    for args in shell_commands(line):
        while args and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", args[0]):  # VAR=value prefixes
            args = args[1:]
        if args:
            _check_simple_command(args, where)


def _check_simple_command(args: list[str], where: str) -> None:
    program, rest = args[0], args[1:]
    if program == "epochal":
        _check_epochal(rest, where)
    elif program == "make":
        _check_make(rest, where)
    elif program == "docker" and rest[:1] == ["compose"]:
        _check_compose(rest[1:], where)
    elif program in DAGSTER_PROGRAMS:
        parse_dagster_command(args)
    elif program in {"python", "python3", ".venv/bin/python"} and rest[:1] == ["-m"]:
        assert len(rest) > 1, f"{where}: `python -m` without a module"
        _check_python_module(rest[1], rest[2:], where)
    else:
        raise AssertionError(f"{where}: `{program}` is not a command the doc test can check")


_CRON_FIELDS = (  # minute, hour, day of month, month, day of week: (low, high, names)
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    (0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_CRON_NICKNAMES = {"@reboot", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


def _cron_field(text: str, low: int, high: int, names: tuple[str, ...], where: str) -> None:
    def value(v: str) -> int:
        if v.lower() in names:
            return low + names.index(v.lower())
        assert v.isdigit() and low <= int(v) <= high, f"{where}: {v!r} is not in {low}-{high}"
        return int(v)

    for item in text.split(","):
        match = re.fullmatch(r"(\*|[^-/]+(?:-[^-/]+)?)(?:/(\d+))?", item)
        assert match, f"{where}: {item!r} is not a crontab field"
        span, step = match.groups()
        assert step is None or int(step) > 0, f"{where}: step 0"
        if span != "*":
            first, _, last = span.partition("-")
            assert value(first) <= (value(last) if last else high), f"{where}: {span!r} runs backwards"


def check_crontab_line(line: str, where: str) -> None:
    """One crontab line: the schedule is valid and the command checks like a ``sh`` line."""
    if not line.strip() or line.lstrip().startswith("#"):
        return
    if re.match(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=", line):  # an environment setting
        return
    fields = line.split(None, 5)
    if fields[0].startswith("@"):
        assert fields[0] in _CRON_NICKNAMES, f"{where}: {fields[0]} is not a crontab schedule"
        command = line.split(None, 1)[1] if len(fields) > 1 else ""
    else:
        assert len(fields) == 6, f"{where}: a crontab line is five schedule fields and a command"
        for text, (low, high, names) in zip(fields[:5], _CRON_FIELDS):
            _cron_field(text, low, high, names, where)
        command = fields[5]
    assert "%" not in command.replace("\\%", ""), f"{where}: cron turns an unescaped % into a newline"
    assert command.strip(), f"{where}: a crontab line without a command"
    check_command(command, where)


def shell_lines(block: Block) -> list[tuple[int, str]]:
    """The command lines of a sh/console block (continuations joined), with their line numbers."""
    out, pending, start = [], "", 0
    for n, raw in enumerate(block.body.splitlines(), start=block.line + 1):
        if block.lang == "console" and not pending:
            if not raw.startswith("$ "):
                continue  # output
            raw = raw[2:]
        if not pending:
            start = n
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line, pending = pending + raw, ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((start, line))
    return out
