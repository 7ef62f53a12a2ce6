"""Figures the reliability tests produce, written into ``docs/reliability.md``.

Each test owns one section, delimited by HTML comments, and replaces only its
own section, so the page is produced by the tests rather than typed by hand:

    <!-- section:crash-matrix -->
    ...table...
    <!-- /section:crash-matrix -->
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
HEADER = (
    "# Reliability\n\n"
    "This page is written by the test suite (`tests/support/reliability_doc.py`); every figure below comes from the\n"
    "last run of the test named in its section. Do not edit by hand: run `make test`.\n"
)


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, title: str, body: str, *, test: str, doc: Path = DOC) -> None:
    """Replace (or append) section ``name`` of the reliability page."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        f"<!-- section:{name} -->\n## {title}\n\n{body.strip()}\n\n"
        f"_Produced by `{test}` on {stamp}._\n<!-- /section:{name} -->"
    )
    text = doc.read_text() if doc.exists() else HEADER
    pattern = re.compile(rf"<!-- section:{re.escape(name)} -->.*?<!-- /section:{re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
