"""Pins why the global asset graph's Materialize of the epoch multi-asset is unreliable in Dagster 1.13.27.

The asset graph's *Materialize* of a range sends GraphQL ``launchPartitionBackfill`` with an
``assetSelection`` (an asset backfill). Before the daemon sees it, the webserver's
``assert_valid_asset_partition_backfill`` (``dagster_graphql/implementation/utils.py``) checks that every
member of a non-subsettable multi-asset targets the same partitions, with ``!=`` between two
``TimeWindowPartitionsSubset``s. That class defines ``__eq__`` but inherits tuple's ``__ne__``, which also
compares the lazily computed partition count (``None`` until computed). Whether ``checkpoint``'s subset
(built from its many parents) has its count computed depends on set iteration order, so on the webserver
process's string hash seed: in some webserver processes every asset backfill of this multi-asset (even
of one partition) is refused with "Targeted subset must match between every key in a non-subsettable
multi-asset", in others it is accepted. ``epochal ui`` and docker-compose run the webserver with
epochal's fix (orchestration/dagster_compat.py, tested in test_dagster_compat.py), and the live test
launches the range from the asset graph with a hash seed the unfixed webserver refuses.

When a Dagster upgrade fixes the comparison, this test fails: then the fix can go, and the docs can say so.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.partitions.subset.time_window import TimeWindowPartitionsSubset

KEYS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]


def test_equal_time_window_subsets_are_also_unequal_when_one_has_not_counted_its_partitions():
    hourly = dg.HourlyPartitionsDefinition(start_date="2026-11-01-00:00")
    counted = hourly.subset_with_partition_keys(KEYS)
    uncounted = TimeWindowPartitionsSubset(partitions_def=hourly, num_partitions=None,
                                           included_time_windows=counted._asdict()["included_time_windows"])
    assert counted._asdict()["num_partitions"] == 3
    assert counted == uncounted
    assert counted != uncounted, "Dagster fixed __ne__: see this module's docstring"
