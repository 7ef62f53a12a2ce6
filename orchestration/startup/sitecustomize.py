"""Run at interpreter start in the processes ``epochal ui`` starts (this folder is first on their PYTHONPATH).

Only the Dagster webserver is touched: it gets epochal's fix of Dagster 1.13's partition-subset
comparison (``epochal.orchestration.dagster_compat``), so that a range backfill launched from the asset
graph is never refused. Every other process (the daemon, code servers, runs, Spark's Python workers)
starts as usual.
"""

import sys

if any("dagster_webserver" in arg or "dagster-webserver" in arg for arg in getattr(sys, "orig_argv", ())):
    from epochal.orchestration.dagster_compat import fix_partition_subset_ne

    fix_partition_subset_ne()
