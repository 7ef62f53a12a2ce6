"""Backfills through Dagster's own backfill daemon, in process and without Spark.

The definitions are loaded as a code location in this process, the daemon's
iteration (``execute_backfill_iteration``) runs here, and the runs it submits are
launched synchronously in this process, with the epoch's body replaced by a stub
that reports every asset of the epoch (Spark never starts). What is checked is
what Dagster decides: which runs a backfill becomes, their partitions and order.

- A backfill from the asset graph (GraphQL ``assetSelection``), or from the job's
  Partitions page (``clickstream_epochs``, the ``partitionSetSelector``), of a
  range of partitions is one run over the whole range (``BackfillPolicy.single_run()``).
- With ``dagster.backfill_chunk: 2``, a job backfill of three partitions is two
  runs, the first two partitions and then the third, oldest first.
- Dagster 1.13's asset backfill daemon refuses a multi-run backfill policy on this
  multi-asset (so ``backfill_chunk`` from the asset graph, when the range is longer
  than the chunk). In ``dagster/_core/execution/asset_backfill.py`` (1.13.27),
  ``_should_backfill_atomic_asset_graph_subset_unit`` narrows the partitions of a
  non-subsettable multi-asset member by member (a self-dependent member keeps only
  the first ``max_partitions_per_run``), but ``_get_cant_run_because_of_parent_reason``
  compares each member's narrowed partitions with its in-asset parent's partitions
  in the *un-narrowed* candidate unit: they differ as soon as a member was narrowed,
  so the next member with a parent in the multi-asset is refused ("parent X is
  requesting a different set of partitions from Y"), nothing is requested, and the
  first iteration fails its invariant ("At least one run should be requested on
  first backfill iteration"). The test pins that: when a Dagster upgrade changes it,
  it fails, and docs/dagster.md's note on ``backfill_chunk`` should be revisited.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.execution.backfill import BULK_ACTION_TERMINAL_STATUSES, BulkActionStatus, PartitionBackfill
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.storage.dagster_run import RunsFilter
from dagster._core.test_utils import create_test_daemon_workspace_context, instance_for_test
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.backfill import execute_backfill_iteration

import epochal.orchestration.epoch as epoch
from epochal.config import load_settings
from epochal.orchestration.assets import CHECK_COMPLETE, CHECK_CONSISTENT, CHECKPOINT, DEPLOYMENT_TAG
from epochal.pipeline.registry import build_pipeline
from tests.support.paths import ROOT

LOCATION = "epochal"
JOB = "clickstream_epochs"
KEYS = ["2026-11-01-01:00", "2026-11-01-02:00", "2026-11-01-03:00"]
ALL_ASSETS = {"parse", "dedupe", "aggregate_users", "aggregate_hours", "sessionize", "quarantine", "user_totals",
              "hourly_revenue", "sessions", "late_events", CHECKPOINT}
LOG = logging.getLogger("epochal.tests.backfill_daemon")


@pytest.fixture()
def chunk(request) -> int | None:
    """``dagster.backfill_chunk`` (parametrize indirectly; default: the whole range in one run)."""
    return getattr(request, "param", None)


@pytest.fixture()
def config(tmp_path: Path, chunk) -> Path:
    path = tmp_path / "epochal.yaml"
    path.write_text(yaml.safe_dump({
        "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints")},
        "partitions": {"start": "2026-11-01T00:00:00+00:00"},
        "dagster": {"backfill_chunk": chunk},
    }))
    return path


@pytest.fixture()
def epochs(monkeypatch, config: Path) -> list[dict]:
    """Replaces the epoch's body: records each run's partition, assets and tags, reports every asset; no Spark."""
    import epochal.state.session

    def refuse(*_a, **_k):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(epochal.state.session, "build_spark_session", refuse)
    pipeline = build_pipeline(load_settings(config))
    order = [s.name for s in pipeline.ordered_stages] + [s.name for s in pipeline.sinks] + [CHECKPOINT]
    executed: list[dict] = []

    def stub(context: dg.AssetExecutionContext, epochal, *, pipeline_name: str):
        selected = {k.to_user_string() for k in context.selected_asset_keys}
        executed.append({"run_id": context.run.run_id, "partitions": list(context.partition_keys), "assets": selected,
                         "tags": dict(context.run.tags)})
        for name in order:
            if name in selected:
                yield dg.MaterializeResult(asset_key=name)
        yield dg.AssetCheckResult(check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=True)
        yield dg.AssetCheckResult(check_name=CHECK_CONSISTENT, asset_key=CHECKPOINT, passed=True)

    monkeypatch.setattr(epoch, "run_partition", stub)
    return executed


@pytest.fixture()
def daemon(tmp_path: Path, config: Path, epochs):
    """A test instance whose runs launch synchronously in this process, and the workspace the daemon sees."""
    module = tmp_path / f"epochal_defs_{uuid.uuid4().hex}.py"  # a fresh module: each test its own configuration
    module.write_text(
        "from epochal.config import load_settings\n"
        "from epochal.orchestration.definitions import build_definitions\n"
        f"defs = build_definitions(load_settings({str(config)!r}), {str(config)!r})\n"
    )
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(python_file=str(module), attribute="defs", working_directory=str(ROOT)),
        location_name=LOCATION,
    )
    with instance_for_test(synchronous_run_coordinator=True, synchronous_run_launcher=True) as instance:
        with create_test_daemon_workspace_context(InProcessWorkspaceLoadTarget(origin), instance) as workspace:
            yield instance, workspace


def _run_backfill(instance, workspace, backfill: PartitionBackfill) -> PartitionBackfill:
    """Adds the backfill and runs the daemon's iterations until it is done (a bound against a loop, not timing)."""
    instance.add_backfill(backfill)
    for _ in range(2 * len(KEYS) + 6):
        list(execute_backfill_iteration(workspace, LOG))
        current = instance.get_backfill(backfill.backfill_id)
        if current.status in BULK_ACTION_TERMINAL_STATUSES:
            return current
    raise AssertionError(f"backfill {backfill.backfill_id} still {current.status}")


def _asset_backfill(instance, workspace, partitions: list[str]) -> PartitionBackfill:
    graph = workspace.create_request_context().asset_graph
    return PartitionBackfill.from_asset_partitions(
        backfill_id=f"assets-{uuid.uuid4().hex[:8]}", asset_graph=graph, partition_names=partitions,
        asset_selection=[dg.AssetKey(k) for k in sorted(ALL_ASSETS)], backfill_timestamp=time.time(), tags={},
        dynamic_partitions_store=instance, all_partitions=False, title=None, description=None, run_config=None,
    )


def _runs(instance, backfill_id: str) -> list:
    return list(reversed(instance.get_runs(RunsFilter(tags={"dagster/backfill": backfill_id}))))  # oldest first


def _job_backfill(workspace, partitions: list[str], asset_selection=None) -> PartitionBackfill:
    """What the job's Partitions page (and GraphQL with a ``partitionSetSelector``) submits."""
    repository = workspace.create_request_context().get_code_location(LOCATION).get_repository("__repository__")
    partition_set = repository.get_partition_set(f"{JOB}_partition_set")
    return PartitionBackfill(
        backfill_id=f"job-{uuid.uuid4().hex[:8]}", partition_set_origin=partition_set.get_remote_origin(),
        status=BulkActionStatus.REQUESTED, partition_names=partitions, from_failure=False, reexecution_steps=None,
        tags={}, backfill_timestamp=time.time(),
        asset_selection=[dg.AssetKey(k) for k in asset_selection] if asset_selection else None,
    )


def _ranges(runs) -> list[tuple[str, str]]:
    return [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"]) for r in runs]


@pytest.mark.parametrize("asset_selection", [None, sorted(ALL_ASSETS)], ids=["job", "job-with-asset-selection"])
def test_a_job_backfill_is_one_run_over_the_range(daemon, epochs, asset_selection):
    instance, workspace = daemon
    backfill = _run_backfill(instance, workspace, _job_backfill(workspace, KEYS, asset_selection))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    (run,) = _runs(instance, backfill.backfill_id)
    assert _ranges([run]) == [(KEYS[0], KEYS[-1])]
    assert run.job_name == JOB and run.tags[DEPLOYMENT_TAG] == "clickstream"
    assert [(e["partitions"], e["assets"]) for e in epochs] == [(KEYS, ALL_ASSETS)], "one run, the whole epochs, in order"


def test_an_asset_backfill_of_a_range_is_one_run(daemon, epochs):
    """The asset graph's Materialize over a range of partitions."""
    instance, workspace = daemon
    backfill = _run_backfill(instance, workspace, _asset_backfill(instance, workspace, KEYS))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    (run,) = _runs(instance, backfill.backfill_id)
    assert _ranges([run]) == [(KEYS[0], KEYS[-1])]
    assert [(e["partitions"], e["assets"]) for e in epochs] == [(KEYS, ALL_ASSETS)]
    # A run of the implicit asset job: the epoch job's run tag is not on it; the op's `epochal` pool still is.
    assert DEPLOYMENT_TAG not in run.tags


def test_an_asset_backfill_of_one_partition_is_one_run(daemon, epochs):
    instance, workspace = daemon
    backfill = _run_backfill(instance, workspace, _asset_backfill(instance, workspace, KEYS[:1]))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    assert len(_runs(instance, backfill.backfill_id)) == 1
    assert [(e["partitions"], e["assets"]) for e in epochs] == [(KEYS[:1], ALL_ASSETS)]


@pytest.mark.parametrize("chunk", [2], indirect=True)
def test_a_chunked_job_backfill_is_runs_of_the_chunk_oldest_first(daemon, epochs, chunk):
    instance, workspace = daemon
    graph = workspace.create_request_context().asset_graph
    assert graph.get(dg.AssetKey(CHECKPOINT)).backfill_policy == dg.BackfillPolicy.multi_run(2)
    backfill = _run_backfill(instance, workspace, _job_backfill(workspace, KEYS))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    assert _ranges(_runs(instance, backfill.backfill_id)) == [(KEYS[0], KEYS[1]), (KEYS[2], KEYS[2])]
    assert [e["partitions"] for e in epochs] == [KEYS[:2], KEYS[2:]], "executed oldest first"


@pytest.mark.parametrize("chunk", [2], indirect=True)
def test_a_chunked_asset_backfill_longer_than_the_chunk_is_refused_by_dagster_1_13(daemon, epochs, caplog, chunk):
    """The note on ``backfill_chunk`` in docs/dagster.md (see the module docstring)."""
    instance, workspace = daemon
    with caplog.at_level(logging.INFO, logger=LOG.name):
        backfill = _run_backfill(instance, workspace, _asset_backfill(instance, workspace, KEYS))

    assert backfill.status == BulkActionStatus.FAILED
    assert "At least one run should be requested on first backfill iteration" in backfill.error.message
    assert "is requesting a different set of partitions from" in caplog.text
    assert _runs(instance, backfill.backfill_id) == [] and epochs == []
