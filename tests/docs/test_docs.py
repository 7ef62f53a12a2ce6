"""Every code example in README.md, docs/*.md and bench/README.md is run or checked here.

Fenced blocks, by language:

* ``python``: the blocks of one file run in order in one namespace (like a
  notebook), in a fresh temporary working directory, with ``spark`` (the test
  session, what ``epochal.state.session.build_spark_session()`` returns) predefined.
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

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from tests.support.doc_shell import check_command, check_crontab_line, shell_lines
from tests.support.paths import ROOT
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
LANGUAGES = {"python", "sh", "console", "crontab", "yaml", "text"}
#: Screenshots of the live Dagster test (tests/orchestration/test_dagster_live.py), which writes them to
#: build/screenshots/; `make docs-images` copies them here. Reported as skipped while they are missing.
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

        from epochal.config import load_settings
        from epochal.orchestration.definitions import build_definitions

        # Resolving definitions reads the current instance's state storage: a live one, whatever
        # earlier tests in this process left behind (Dagster keeps it in a context variable).
        with dg.instance_for_test():
            job = build_definitions(load_settings(None, env={})).resolve_job_def(block.reason)
            dg.validate_run_config(job, yaml.safe_load(block.body))
    elif block.lang == "yaml":
        from epochal.config import load_settings

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
    from epochal.pipeline.registry import PIPELINES

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
        pytest.skip(f"{name} is missing: run the live Dagster test, then make docs-images")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{name} is a PNG"


def test_make_docs_images_copies_the_live_tests_screenshots_here():
    from tests.support.doc_shell import _makefile_recipe

    recipe = "\n".join(_makefile_recipe("docs-images"))
    assert "docs/images/" in recipe and "$(SCREENSHOTS)" in recipe, recipe
    for name in sorted(SCREENSHOTS):
        assert Path(name).name in recipe, f"make docs-images copies {name}"


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
    from epochal.config import ConfigError
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
