"""make test's work units (tests/support/xdist_units.py): single tests, but a module with a module fixture whole."""

from __future__ import annotations

from tests.support.paths import ROOT
from tests.support.xdist_units import shares_a_module_fixture, unit_of

STAGES = "tests/pipeline/examples/clickstream/test_clickstream_stages.py"
RUNNER = "tests/pipeline/test_runner.py"


def test_a_module_with_a_module_fixture_is_one_unit_other_tests_are_their_own(tmp_path):
    assert shares_a_module_fixture(ROOT / STAGES) and not shares_a_module_fixture(ROOT / RUNNER)
    written = tmp_path / "test_x.py"
    written.write_text('import pytest\n\n@pytest.fixture(scope="module")\ndef built():\n    return 1\n')
    assert shares_a_module_fixture(written)
    assert not shares_a_module_fixture(tmp_path / "missing.py")

    shared: dict[str, bool] = {}
    assert unit_of(f"{STAGES}::test_every_sink_equals_the_reference", ROOT, shared) == STAGES
    assert unit_of(f"{STAGES}::test_each_epoch_emits_what_the_reference_emits", ROOT, shared) == STAGES
    one = f"{RUNNER}::test_run_checkpoints_restore_and_backfill"
    assert unit_of(one, ROOT, shared) == one
    assert shared == {STAGES: True, RUNNER: False}
