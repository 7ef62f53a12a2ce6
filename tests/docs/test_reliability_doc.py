"""docs/reliability.md is what ``make reliability-doc`` makes of the tests' figures; no test rewrites it.

The reliability tests write their sections to the figures folder (``build/figures/``, untracked); the
generator (tests/support/reliability_doc.py) puts them into the page. Here: the committed page has the
generator's shape (its header, only delimited sections, each naming an existing test), and the generator
replaces one section without touching the others, in a temporary folder.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support import reliability_doc as rd
from tests.support import paths
from tests.support.paths import ROOT

#: The sections the reliability tests produce, and the test that writes each.
SECTIONS = {
    "parser-fuzz": "tests/pipeline/examples/clickstream/test_parser_fuzz.py",
    "concurrency": "tests/pipeline/test_concurrent_runs.py",
    "distributed-cluster": "tests/orchestration/test_cluster_clickstream.py",
    "distributed-s3": "tests/state/delta/test_object_storage.py",
    "crash-matrix": "tests/pipeline/test_crash_matrix.py",
    "corruption": "tests/pipeline/test_corruption.py",
}


def test_the_committed_page_has_the_generators_shape():
    committed = rd.DOC.read_text()
    assert rd.render(committed) == committed, "docs/reliability.md differs from what make reliability-doc writes"
    assert committed.startswith(rd.HEADER)
    assert set(rd.sections_of(committed)) == set(SECTIONS)
    for name, block in rd.sections_of(committed).items():
        assert re.search(r"^## \S", block, re.M), f"section {name} has a heading"
        produced = re.findall(r"^_Produced by `([^`]+)` on \d{4}-\d\d-\d\d \d\d:\d\d UTC\._$", block, re.M)
        assert produced == [SECTIONS[name]], f"section {name} names its test: {produced}"
        assert (ROOT / produced[0]).is_file(), produced[0]


@pytest.mark.parametrize("name,test", [pytest.param(n, t, id=n) for n, t in SECTIONS.items()])
def test_each_section_is_written_by_its_test_into_the_figures_folder(name, test):
    source = (ROOT / test).read_text()
    assert re.search(rf'write_section\(\s*"{re.escape(name)}"', source), f"{test} writes section {name}"
    assert "test=__file__" in source


def test_tests_write_their_figures_and_screenshots_to_an_untracked_folder(tmp_path):
    assert paths.figures_dir({}) == ROOT / "build" / "figures"
    assert paths.screenshots_dir({}) == ROOT / "build" / "screenshots"
    assert "/build/" in (ROOT / ".gitignore").read_text().splitlines()
    assert paths.figures_dir({"EPOCHAL_FIGURES_DIR": str(tmp_path)}) == tmp_path


def test_the_generator_replaces_a_section_and_keeps_the_others(tmp_path):
    doc = tmp_path / "reliability.md"
    doc.write_text(rd.DOC.read_text())
    figures = tmp_path / "figures"
    written = rd.write_section("crash-matrix", "Crash matrix", "| a |\n|---|\n| 1 |", test=ROOT / SECTIONS["crash-matrix"],
                               figures=figures)
    assert written == figures / "crash-matrix.json"
    assert json.loads(written.read_text())["test"] == SECTIONS["crash-matrix"]
    rd.write_section("new-one", "A new section", "text", test="tests/test_architecture.py", figures=figures)

    assert rd.main(["--figures", str(figures), "--doc", str(doc)]) == 0
    before, after = rd.sections_of(rd.DOC.read_text()), rd.sections_of(doc.read_text())
    assert list(after) == [*before, "new-one"]
    assert {n: b for n, b in after.items() if n not in {"crash-matrix", "new-one"}} == {
        n: b for n, b in before.items() if n != "crash-matrix"
    }
    assert "| 1 |" in after["crash-matrix"] and "## Crash matrix" in after["crash-matrix"]
    assert rd.render(doc.read_text()) == doc.read_text()


def test_the_generator_refuses_to_run_without_figures(tmp_path, capsys):
    doc = tmp_path / "reliability.md"
    assert rd.main(["--figures", str(tmp_path / "none"), "--doc", str(doc)]) == 1
    assert not doc.exists()
    assert "run the reliability tests first" in capsys.readouterr().err
