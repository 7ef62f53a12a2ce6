"""A fix for Dagster 1.13's webserver, so that a range backfill from the asset graph is never refused.

The asset graph's *Materialize* over a range of partitions sends GraphQL
``launchPartitionBackfill`` with an ``assetSelection``. Before the daemon sees it,
the webserver (``assert_valid_asset_partition_backfill`` in
``dagster_graphql/implementation/utils.py``) checks that every member of a
non-subsettable multi-asset targets the same partitions, with ``!=`` between two
``TimeWindowPartitionsSubset``s. That NamedTuple defines ``__eq__`` (the same time
windows) but inherits tuple's ``__ne__``, which also compares the lazily computed
partition count (``None`` until computed). Whether the subsets of the epoch
multi-asset have their counts computed depends on set iteration order, so on the
webserver's string hash seed: in some webserver processes every asset backfill of
the pipeline is refused ("Targeted subset must match between every key in a
non-subsettable multi-asset"), in others it is accepted (Dagster 1.13.27 and
1.13.29 alike; ``tests/orchestration/test_dagster_asset_graph_backfill_validation.py``
pins the behaviour).

:func:`fix_partition_subset_ne` gives the class the ``__ne__`` its ``__eq__`` implies.
``epochal ui`` applies it in the webserver that ``dagster dev`` starts (through
``startup/sitecustomize.py`` on ``PYTHONPATH``), and docker-compose runs the
webserver as ``python -m epochal.orchestration.webserver``, which applies it first.
It does nothing once Dagster defines ``__ne__`` itself.
"""

from __future__ import annotations


def fix_partition_subset_ne() -> bool:
    """Make ``a != b`` mean ``not a == b`` for time-window partition subsets; True if it was needed."""
    from dagster._core.definitions.partitions.subset.time_window import TimeWindowPartitionsSubset

    if TimeWindowPartitionsSubset.__ne__ is not tuple.__ne__:  # Dagster defines it: nothing to fix
        return False
    TimeWindowPartitionsSubset.__ne__ = _ne
    return True


def _ne(self, other) -> bool:
    equal = self.__eq__(other)
    return equal if equal is NotImplemented else not equal
