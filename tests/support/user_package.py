"""A user's own pipeline package, written outside the repository and put on the import path
(``sys.path`` for this process, ``PYTHONPATH`` for the ``epochal`` processes a test starts)."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def on_import_path(site: Path, package: str, modules: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Write ``site/<package>/<module>.py`` for each of ``modules`` (name -> source) and make it importable;
    forget the package's modules afterwards, so that the next test writes its own."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text("")
    for name, source in modules.items():
        (site / package / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p))
    try:
        yield site
    finally:
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
