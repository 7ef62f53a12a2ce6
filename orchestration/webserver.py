"""``python -m epochal.orchestration.webserver``: ``dagster-webserver`` with epochal's fix of Dagster 1.13
(:mod:`epochal.orchestration.dagster_compat`); the same arguments. docker-compose runs the UI with it."""

from __future__ import annotations

import sys

from epochal.orchestration.dagster_compat import fix_partition_subset_ne

if __name__ == "__main__":
    fix_partition_subset_ne()
    from dagster_webserver.cli import main

    sys.exit(main())
