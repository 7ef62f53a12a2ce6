"""Figures the reliability tests produce, and the page ``docs/reliability.md`` made from them.

A test hands its section of the page (a title and a Markdown body of tables and sentences) to
:func:`write_section`, which writes it as one JSON file into the figures folder
(:data:`tests.support.paths.FIGURES`: ``build/figures/``, untracked, or ``$EPOCHAL_FIGURES_DIR``), never
into ``docs/``. ``make reliability-doc`` (``python -m tests.support.reliability_doc``) then puts the sections
into the page. Each section is delimited by HTML comments and replaces only the section of its name; the
sections no figure was found for stay as they are, and a new one is appended:

    <!-- section:crash-matrix -->
    ## Crash matrix
    ...tables...
    _Produced by `tests/pipeline/test_crash_matrix.py` on 2026-11-23 05:37 UTC._
    <!-- /section:crash-matrix -->
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from tests.support.paths import FIGURES, ROOT

DOC = ROOT / "docs" / "reliability.md"
HEADER = (
    "# Reliability\n\n"
    "This page is produced by `make reliability-doc` (`tests/support/reliability_doc.py`) from the figures the\n"
    "tests write to `build/figures/`; every figure below comes from the last run of the test named in its\n"
    "section. Do not edit by hand: run the tests (`make test`), then `make reliability-doc`.\n"
)
_SECTION = re.compile(r"<!-- section:(?P<name>[\w.-]+) -->.*?<!-- /section:(?P=name) -->", re.S)


@dataclass(frozen=True)
class Section:
    """One section of the page: what a test produced, and when."""

    name: str
    title: str
    body: str
    test: str  # the test file, relative to the repository
    produced: str  # "YYYY-MM-DD HH:MM UTC"

    def block(self) -> str:
        return (
            f"<!-- section:{self.name} -->\n## {self.title}\n\n{self.body.strip()}\n\n"
            f"_Produced by `{self.test}` on {self.produced}._\n<!-- /section:{self.name} -->"
        )


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _relative(test: str | os.PathLike) -> str:
    path = Path(test)
    if path.is_absolute() and path.resolve().is_relative_to(ROOT):
        return path.resolve().relative_to(ROOT).as_posix()
    return path.as_posix()


def write_section(name: str, title: str, body: str, *, test: str | os.PathLike, figures: Path | None = None) -> Path:
    """Write section ``name`` of the reliability page to the figures folder (``test``: the test's file,
    e.g. ``__file__``); ``make reliability-doc`` puts it into docs/reliability.md."""
    assert re.fullmatch(r"[\w.-]+", name), name
    section = Section(name, title, body, _relative(test), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    folder = Path(figures or FIGURES)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(asdict(section), indent=2) + "\n")
    partial.replace(path)
    return path


def load_figures(folder: Path) -> list[Section]:
    """The sections in the figures folder, by name."""
    return [Section(**json.loads(p.read_text())) for p in sorted(Path(folder).glob("*.json"))]


def sections_of(text: str) -> dict[str, str]:
    """The sections of a page, name -> block, in page order."""
    return {m.group("name"): m.group(0) for m in _SECTION.finditer(text)}


def render(text: str | None, sections: Iterable[Section] = ()) -> str:
    """The page: the header, then the sections of ``text`` in their order with ``sections`` in place of those
    of the same name, then the new ones. Anything else in ``text`` is not kept."""
    blocks = sections_of(text or "")
    for section in sections:
        blocks[section.name] = section.block()
    return HEADER.rstrip() + "\n\n" + "\n\n".join(blocks.values()) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.reliability_doc",
        description="Put the reliability tests' figures into docs/reliability.md.",
    )
    parser.add_argument("--figures", type=Path, default=FIGURES, help="the folder of the tests' figures (*.json)")
    parser.add_argument("--doc", type=Path, default=DOC, help="the page to update")
    args = parser.parse_args(argv)
    sections = load_figures(args.figures)
    if not sections:
        print(f"no figures in {args.figures}: run the reliability tests first (make test)", file=sys.stderr)
        return 1
    before = args.doc.read_text() if args.doc.exists() else None
    after = render(before, sections)
    if after != before:
        args.doc.parent.mkdir(parents=True, exist_ok=True)
        args.doc.write_text(after)
    kept = [name for name in sections_of(before or "") if name not in {s.name for s in sections}]
    for s in sections:
        print(f"{args.doc}: {s.name} from {s.test} ({s.produced})")
    if kept:
        print(f"{args.doc}: kept as they were (no figures): {', '.join(kept)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
