"""``epochal new NAME`` writes a starter pipeline package that runs as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from epochal.config import Settings
from epochal.orchestration.cli import main
from epochal.pipeline.registry import build_pipeline

EPOCHAL = str(Path(sys.executable).with_name("epochal"))


def test_new_writes_a_package_a_config_and_a_test(tmp_path, capsys, monkeypatch):
    assert main(["new", "acme_totals", "--dir", str(tmp_path / "acme"), "--json"]) == 0
    root = tmp_path / "acme"
    for relative in ("acme_totals/pipeline.py", "epochal.yaml", "tests/test_pipeline.py", "pyproject.toml", "README.md"):
        assert (root / relative).is_file(), relative
    monkeypatch.syspath_prepend(str(root))
    try:
        pipeline = build_pipeline(Settings(pipeline="acme_totals.pipeline:build", options={"max_parallelism": 8}))
    finally:
        for name in [m for m in sys.modules if m.startswith("acme_totals")]:
            del sys.modules[name]
    assert pipeline.name == "acme_totals" and pipeline.max_parallelism == 8
    assert [s.keyed_state for s in pipeline.stages][1][0].name == "total"


@pytest.mark.parametrize("name", ["Acme", "1acme", "acme-totals", "class"])
def test_new_refuses_a_name_that_is_not_a_package_name(tmp_path, capsys, name):
    assert main(["new", name, "--dir", str(tmp_path / "x")]) == 1
    assert f"cannot create a pipeline called {name!r}" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_new_never_overwrites(tmp_path, capsys):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "keep.txt").write_text("mine")
    assert main(["new", "acme", "--dir", str(tmp_path / "acme")]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    assert (tmp_path / "acme" / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_the_starter_packages_own_test_passes(tmp_path):
    """Scaffolded by the CLI, its test run by pytest in its own process (its own JVM), as a user would."""
    result = subprocess.run([EPOCHAL, "new", "acme_totals", "--dir", str(tmp_path / "acme")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "acme")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "acme")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "acme", env=env, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout


@pytest.mark.slow
def test_the_starter_readme_commands_run_one_epoch(tmp_path):
    """The starter's README, as a user follows it: a line of input, one epoch, the checkpoint listed."""
    project = tmp_path / "acme"
    assert subprocess.run([EPOCHAL, "new", "acme_totals", "--dir", str(project)], capture_output=True).returncode == 0
    readme = (project / "README.md").read_text()
    commands = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    shell = [line for line in commands if line.split()[0] in ("mkdir", "echo", "epochal")]
    assert [line.split()[0] for line in shell] == ["mkdir", "echo", "epochal", "epochal"], shell
    env = {**os.environ, "PYTHONPATH": str(project), "PATH": f"{Path(EPOCHAL).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(shell)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    epoch, listed = done.stdout.split("\nid ", 1)
    assert "2026-11-01-00:00" in epoch and "totals 1, quarantine 0" in epoch
    assert "checkpoint  retained      0  2026-11-01-00:00" in listed
