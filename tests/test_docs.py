"""Every code example in README.md, docs/*.md and bench/README.md is run or checked here.

Fenced blocks, by language:

* ``python``: the blocks of one file run in order in one namespace (like a
  notebook), in a fresh temporary working directory, with ``spark`` (the test
  session, what ``state.session.build_spark_session()`` returns) predefined.
* ``sh`` / ``console``: every command line is checked (in ``console`` blocks the
  lines starting with ``$ ``): ``epochal ...`` parses with the real argument
  parser; ``make TARGET`` names a target of the Makefile, and a ``VAR=value``
  given to make names a variable of the Makefile (when the target's recipe
  passes ``$(VAR)`` to ``python -m MODULE``, the value parses as that module's
  arguments); ``docker compose ...`` names services of docker-compose.yml (and
  ``run``/``exec SERVICE epochal ...`` parses); ``dagster ...`` parses with
  Dagster's own commands; ``python -m MODULE ARGS`` names an importable module,
  and its arguments parse with the module's own argparse parser (the module is
  run up to the parse, then stopped). Redirections (``> FILE``, ``2>&1``) are
  left out; each command of a ``|``, ``&&`` or ``;`` list is checked. Any other
  command is an error, so that no example goes unchecked.
* ``crontab``: crontab lines; the five schedule fields (or ``@hourly`` and
  the like) are validated and the command is checked like a ``sh`` line.
* ``yaml``: an epochal configuration, loaded with ``config.load_settings``;
  after ``<!-- doctest: dagster.yaml -->`` a Dagster instance configuration,
  validated by Dagster; after ``<!-- doctest: dagster-run-config JOB -->`` the
  run configuration of the Dagster job JOB, validated against that job.
* ``text``: output or a picture in characters; not run.

A block after ``<!-- doctest: skip REASON -->`` is not run; the test reports it
as skipped with its reason. A block with any other language fails the test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import runpy
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster_cli import PROGRAMS as DAGSTER_PROGRAMS
from dagster_cli import parse_dagster_command

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
LANGUAGES = {"python", "sh", "console", "crontab", "yaml", "text"}
#: Screenshots the live Dagster test (tests/test_dagster_live.py) writes; reported as skipped until it has run.
SCREENSHOTS = {"docs/images/lineage.png", "docs/images/checkpoint-plots.png"}

_FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*doctest:\s*(?P<what>[\w.-]+)\s*(?P<reason>.*?)\s*-->\s*$")
_LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    body: str
    directive: str | None = None
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """The fenced code blocks of a Markdown file, with the doctest directive just above each."""
    text = path.read_text() if text is None else text
    found = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = _DIRECTIVE.search(before)
        indent = len(match.group("indent"))
        body = "\n".join(l[indent:] for l in match.group("body").splitlines())
        found.append(
            Block(path, line, match.group("lang").lower(), body,
                  directive.group("what") if directive else None, directive.group("reason") if directive else "")
        )
    return found


def all_blocks() -> list[Block]:
    return [b for path in DOCS for b in blocks(path)]


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
    from orchestration.cli import build_parser

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


# ----------------------------------------------------------------------------- checking blocks


def check_static(block: Block, tmp_path: Path) -> None:
    """Check a non-python block (raises AssertionError or the loader's error if it is broken)."""
    if block.lang in {"sh", "console"}:
        lines = shell_lines(block)
        assert lines, f"{block.where}: a shell block without a command"
        for line_no, line in lines:
            check_command(line, f"{block.path.relative_to(ROOT)}:{line_no}")
    elif block.lang == "crontab":
        entries = [(n, l) for n, l in enumerate(block.body.splitlines(), start=block.line + 1)
                   if l.strip() and not l.lstrip().startswith("#")]
        assert entries, f"{block.where}: a crontab block without a line"
        for line_no, line in entries:
            check_crontab_line(line, f"{block.path.relative_to(ROOT)}:{line_no}")
    elif block.lang == "yaml" and block.directive == "dagster.yaml":
        from dagster._core.instance.config import dagster_instance_config

        folder = tmp_path / "dagster-home"
        folder.mkdir()
        (folder / "dagster.yaml").write_text(block.body)
        dagster_instance_config(str(folder))
    elif block.lang == "yaml" and block.directive == "dagster-run-config":
        import dagster as dg

        from config import load_settings
        from orchestration.definitions import build_definitions

        # Resolving definitions reads the current instance's state storage: a live one, whatever
        # earlier tests in this process left behind (Dagster keeps it in a context variable).
        with dg.instance_for_test():
            job = build_definitions(load_settings(None, env={})).resolve_job_def(block.reason)
            dg.validate_run_config(job, yaml.safe_load(block.body))
    elif block.lang == "yaml":
        from config import load_settings

        path = tmp_path / "epochal.yaml"
        path.write_text(block.body)
        load_settings(path, env={})


def run_python(blocks_of_file: list[Block], spark, workdir: Path) -> dict:
    namespace: dict = {"__name__": f"docs_example_{blocks_of_file[0].path.stem}", "spark": spark}
    old = Path.cwd()
    os.chdir(workdir)
    try:
        for block in blocks_of_file:
            try:
                exec(compile(block.body, block.where, "exec"), namespace)  # noqa: S102 - the docs' own examples
            except Exception as exc:
                raise AssertionError(f"{block.where}: the example fails: {type(exc).__name__}: {exc}") from exc
    finally:
        os.chdir(old)
    return namespace


# ----------------------------------------------------------------------------- the tests


def _static_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.lang not in {"python", "text"} and b.directive != "skip"]


def _python_files() -> list[Path]:
    return [p for p in DOCS if any(b.lang == "python" and b.directive != "skip" for b in blocks(p))]


def test_every_block_has_a_language_the_test_knows():
    unknown = [f"{b.where} ({b.lang or 'no language'})" for b in all_blocks() if b.lang not in LANGUAGES]
    assert not unknown, f"blocks the doc test cannot run: {unknown}"
    directives = {b.directive for b in all_blocks()} - {None}
    assert directives <= {"skip", "dagster.yaml", "dagster-run-config"}, directives
    assert all(b.reason for b in all_blocks() if b.directive == "skip"), "a skipped block says why"


@pytest.mark.parametrize("block", _static_blocks(), ids=lambda b: b.where)
def test_shell_and_yaml_examples(block: Block, tmp_path):
    check_static(block, tmp_path)


def _uses_spark(path: Path) -> bool:
    return any(re.search(r"\bspark\b", b.body) for b in blocks(path) if b.lang == "python")


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, marks=[pytest.mark.slow] if _uses_spark(p) else []) for p in _python_files()],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_python_examples_run(path: Path, request, monkeypatch, tmp_path):
    from pipeline.registry import PIPELINES

    for name in [n for n in os.environ if n == "EPOCHAL_CONFIG" or n.upper().startswith("EPOCHAL__")]:
        monkeypatch.delenv(name)  # the examples read the default configuration
    spark = request.getfixturevalue("spark") if _uses_spark(path) else None
    registered = dict(PIPELINES)
    try:
        run_python([b for b in blocks(path) if b.lang == "python" and b.directive != "skip"], spark, tmp_path)
    finally:
        PIPELINES.clear()
        PIPELINES.update(registered)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.directive == "skip"] or [None],
                         ids=lambda b: b.where if b else "none")
def test_skipped_examples_are_reported(block):
    if block is None:
        return
    pytest.skip(f"{block.where}: not run: {block.reason}")


def test_relative_links_and_pictures_exist():
    for path in DOCS:
        for match in _LINK.finditer(path.read_text()):
            target = match.group("target").split("#", 1)[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            resolved = (path.parent / target).resolve()
            name = str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)
            if name in SCREENSHOTS and not resolved.exists():
                continue  # reported by test_screenshots_are_real_pictures
            assert resolved.exists(), f"{path.relative_to(ROOT)} links to {target}, which does not exist"


@pytest.mark.parametrize("name", sorted(SCREENSHOTS))
def test_screenshots_are_real_pictures(name):
    assert f"]({name})" in (ROOT / "README.md").read_text(), f"README shows {name}"
    path = ROOT / name
    if not path.exists():
        pytest.skip(f"{name} is written by the live Dagster test, which has not run in this tree")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is a PNG"


# ----------------------------------------------------------------------------- the checker fails on broken examples

BROKEN = """
```sh
epochal run --frm 2026-11-01-00:00
```

```sh
make no-such-target
```

```sh
docker compose exec no-such-service epochal checkpoints list
```

```sh
docker compose exec dagster-code epochal restore --checkpoint 3 --savepoint x
```

```sh
rm -rf /
```

```sh
EPOCHAL_CONFIG=x.yaml dagster dev --no-such-option
```

```sh
epochal checkpoints list --json > out.json && epochal run --frm 2026-11-01-00:00 2>&1 | tee run.log
```

```sh
.venv/bin/python -m bench --prts churn
```

```sh
make bench BENCH_ARGS=--quik
```

```sh
make bench NO_SUCH_VARIABLE=1
```

```crontab
61 * * * *  epochal run --json
```

```crontab
5 * * * *  epochal rn --json >> /var/log/epochal.jsonl
```

```crontab
@hourly epochal run --json
5 * * *  epochal run
```

```yaml
checkpoints:
  retian: 3
```

<!-- doctest: dagster.yaml -->
```yaml
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  confg: {}
```

<!-- doctest: dagster-run-config restore -->
```yaml
ops:
  restore_state:
    config:
      savepont: before-upgrade
```
"""

GOOD = """
```console
$ epochal checkpoints list --json
{"checkpoints": []}
```

```sh
epochal checkpoints list --json > out.json 2>&1 && epochal run --to 2026-11-01-05:00 >> run.log  # redirections
make bench BENCH_ARGS="--quick --parts churn"
.venv/bin/python -m bench --parts churn --churn-keys 1000
python -m bench.report
```

```crontab
MAILTO=ops@example.com
# m h dom mon dow  command
*/15 0-6,22 1-31 jan-dec mon-fri  epochal run --config /etc/epochal/epochal.yaml --json >> /var/log/epochal.jsonl 2>&1
@daily  epochal savepoint --config /etc/epochal/epochal.yaml
```
"""


def test_a_broken_example_fails_the_check(tmp_path):
    import click
    from config import ConfigError
    from dagster._core.errors import DagsterInvalidConfigError

    found = blocks(ROOT / "docs" / "broken.md", BROKEN)
    assert [b.lang for b in found] == ["sh"] * 10 + ["crontab"] * 3 + ["yaml"] * 3
    for i, block in enumerate(found):
        case = tmp_path / str(i)
        case.mkdir()
        with pytest.raises((AssertionError, ConfigError, DagsterInvalidConfigError, click.UsageError)):
            check_static(block, case)
    good = blocks(ROOT / "docs" / "good.md", GOOD)
    assert [b.lang for b in good] == ["console", "sh", "crontab"]
    for block in good:
        check_static(block, tmp_path)
    with pytest.raises(AssertionError, match="broken.md:2"):
        run_python([Block(ROOT / "docs" / "broken.md", 2, "python", "assert 1 + 1 == 3")], None, tmp_path)
