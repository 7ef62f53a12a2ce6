"""Where things are for the tests: the repository, the test data, and the untracked folders tests write to.

Tests never write into tracked files. Figures for ``docs/reliability.md`` go to :data:`FIGURES` and
screenshots of the Dagster UI to :data:`SCREENSHOTS` (both under the gitignored ``build/``, or where the
environment variables ``EPOCHAL_FIGURES_DIR`` and ``EPOCHAL_SCREENSHOTS_DIR`` say); ``make reliability-doc``
and ``make docs-images`` bring them into ``docs/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The repository (the folder of pyproject.toml).
ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: Files the tests read (golden files).
DATA = TESTS / "data"


def figures_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The reliability tests' figures: one JSON file per section of docs/reliability.md."""
    return Path(env.get("EPOCHAL_FIGURES_DIR") or ROOT / "build" / "figures").absolute()


def screenshots_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The live Dagster test's screenshots (the README shows their copies in docs/images/)."""
    return Path(env.get("EPOCHAL_SCREENSHOTS_DIR") or ROOT / "build" / "screenshots").absolute()


FIGURES = figures_dir()
SCREENSHOTS = screenshots_dir()


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that imports ``tests.*`` (a test pipeline run as its own process):
    ``env`` (default: this process's) with the repository first on the child's PYTHONPATH, as a user puts
    their own pipeline's package there. The test process itself needs no PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env
