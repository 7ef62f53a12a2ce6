"""The Dagster instance ``epochal ui`` writes: Dagster itself reads it back with epochal's limits and queue.

One epoch run at a time per deployment (the run tag's limit), the ``epochal`` pool at one, and a queue the
daemon drains every second instead of Dagster's five; an instance file the user wrote is left as it is.
"""

from __future__ import annotations

import dagster as dg
import yaml

from epochal.orchestration import ui


def test_the_written_instance_has_the_limits_and_a_one_second_queue(tmp_path):
    workspace = ui.prepare_home(tmp_path)
    assert workspace.exists()
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        coordinator = instance.run_coordinator
        assert type(coordinator).__name__ == "QueuedRunCoordinator"
        assert coordinator.dequeue_interval_seconds == ui.DEQUEUE_INTERVAL_S == 1
        concurrency = instance.get_concurrency_config()
        limits = concurrency.run_queue_config.tag_concurrency_limits
        assert [(limit["key"], limit["limit"]) for limit in limits] == [("epochal/deployment", 1)]
        assert concurrency.pool_config.default_pool_limit == 1


def test_an_existing_instance_file_is_kept(tmp_path):
    own = {"telemetry": {"enabled": False}, "run_queue": {"dequeue_interval_seconds": 7}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(own))
    ui.prepare_home(tmp_path)
    assert yaml.safe_load((tmp_path / "dagster.yaml").read_text()) == own
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert instance.run_coordinator.dequeue_interval_seconds == 7
