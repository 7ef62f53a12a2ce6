"""epochal's fix of Dagster 1.13's partition-subset ``!=`` (orchestration/dagster_compat.py), and where it applies.

The bug itself is pinned in test_dagster_asset_graph_backfill_validation.py; here the fix is applied
(and undone by monkeypatch), and the processes ``epochal ui`` and docker-compose start are checked to get it:
only the webserver.
"""

from __future__ import annotations

import subprocess
import sys

import dagster as dg
import pytest
from dagster._core.definitions.partitions.subset.time_window import TimeWindowPartitionsSubset

from epochal.orchestration.dagster_compat import fix_partition_subset_ne
from epochal.orchestration.ui import STARTUP

KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]
PATCHED = ("from dagster._core.definitions.partitions.subset.time_window import TimeWindowPartitionsSubset as T;"
           "print(T.__ne__ is not tuple.__ne__)")


def test_equal_subsets_are_not_unequal_after_the_fix(monkeypatch):
    monkeypatch.setattr(TimeWindowPartitionsSubset, "__ne__", tuple.__ne__)
    hourly = dg.HourlyPartitionsDefinition(start_date="2026-11-01-00:00")
    counted = hourly.subset_with_partition_keys(KEYS)
    uncounted = TimeWindowPartitionsSubset(partitions_def=hourly, num_partitions=None,
                                           included_time_windows=counted._asdict()["included_time_windows"])
    assert fix_partition_subset_ne() is True
    assert counted == uncounted and not counted != uncounted
    assert counted != hourly.subset_with_partition_keys(KEYS[:2])
    assert fix_partition_subset_ne() is False, "applied once"


@pytest.mark.parametrize("argv, patched", [([], "False"), (["dagster_webserver"], "True")], ids=["other", "webserver"])
def test_the_startup_folder_fixes_only_the_webserver(argv, patched):
    """``epochal ui`` puts startup/ first on PYTHONPATH: its sitecustomize patches a webserver process only."""
    env = {"PYTHONPATH": str(STARTUP), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PATCHED, *argv], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == patched


def test_the_webserver_module_runs_dagster_webserver():
    """What docker-compose's dagster-webserver service runs: dagster-webserver's own command line."""
    out = subprocess.run([sys.executable, "-m", "epochal.orchestration.webserver", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--workspace" in out.stdout or "-w" in out.stdout
