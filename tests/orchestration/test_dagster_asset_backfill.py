"""Backfills through Dagster's own backfill daemon, in process and without Spark.

The definitions are loaded as a code location in this process, the daemon's
iteration (``execute_backfill_iteration``) runs here, and the runs it submits are
launched synchronously in this process, with the epoch's body replaced by a stub
that reports every asset of the epoch (Spark never starts). What is checked is
what Dagster decides: which runs a backfill becomes, their partitions and order.

- A job backfill (``clickstream_epochs``, as the job's Partitions page and the
  GraphQL ``partitionSetSelector`` launch it) is one run per partition, each the
  whole epoch, oldest first.
- An asset backfill (the asset graph, GraphQL ``assetSelection`` without a
  selector) of one partition is one run.
- An asset backfill of more than one partition is refused by Dagster 1.13's
  asset backfill daemon, whichever members of the multi-asset depend on their
  previous partition, with or without a backfill policy of one partition per run.
  In ``dagster/_core/execution/asset_backfill.py`` (1.13.27),
  ``_should_backfill_atomic_asset_graph_subset_unit`` narrows the partitions of a
  non-subsettable multi-asset member by member (a self-dependent member keeps only
  the partitions whose previous partition is not waiting, or the first
  ``max_partitions_per_run``), but ``_get_cant_run_because_of_parent_reason``
  compares each member's narrowed partitions with its in-asset parent's partitions
  in the *un-narrowed* candidate unit: they differ as soon as a member was narrowed,
  so the next member with a parent in the multi-asset is refused ("parent X is
  requesting a different set of partitions from Y"), nothing is requested, and the
  first iteration fails its invariant ("At least one run should be requested on
  first backfill iteration"). The test pins that: when a Dagster upgrade changes it,
  it fails, and docs/dagster.md's known limitation should be revisited.
"""

from __future__ import annotations

import functools
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

import epochal.orchestration.assets as assets
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
def config(tmp_path: Path) -> Path:
    path = tmp_path / "epochal.yaml"
    path.write_text(yaml.safe_dump({
        "landing": str(tmp_path / "landing"), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints")},
        "partitions": {"start": "2026-11-01T00:00:00+00:00"},
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
        executed.append({"run_id": context.run.run_id, "partition": context.partition_key, "assets": selected,
                         "tags": dict(context.run.tags)})
        for name in order:
            if name in selected:
                yield dg.MaterializeResult(asset_key=name)
        yield dg.AssetCheckResult(check_name=CHECK_COMPLETE, asset_key=CHECKPOINT, passed=True)
        yield dg.AssetCheckResult(check_name=CHECK_CONSISTENT, asset_key=CHECKPOINT, passed=True)

    monkeypatch.setattr(epoch, "run_partition", stub)
    return executed


def _self_dependent_everywhere(original):
    def specs(pipeline, version):
        out = []
        for spec in original(pipeline, version):
            if all(dep.asset_key != spec.key for dep in spec.deps):
                spec = spec.replace_attributes(deps=[*spec.deps, assets.previous_partition(spec.key.to_user_string())])
            out.append(spec)
        return out
    return specs


@pytest.fixture()
def variant(request, monkeypatch) -> str:
    """How the multi-asset is declared: as orchestration/assets.py does, or the alternatives tried."""
    name = getattr(request, "param", "as-defined")
    if name != "as-defined":
        monkeypatch.setattr(assets, "asset_specs", _self_dependent_everywhere(assets.asset_specs))
    if name.endswith("multi-run-1"):
        policy = dg.BackfillPolicy.multi_run(1)
        monkeypatch.setattr(dg, "multi_asset", functools.partial(dg.multi_asset, backfill_policy=policy))
    return name


@pytest.fixture()
def daemon(tmp_path: Path, config: Path, epochs, variant):
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


@pytest.mark.parametrize("asset_selection", [None, sorted(ALL_ASSETS)], ids=["job", "job-with-asset-selection"])
def test_a_job_backfill_is_one_run_per_partition_oldest_first(daemon, epochs, asset_selection):
    """What the job's Partitions page (and, from the job's page, the asset launcher) submits."""
    instance, workspace = daemon
    repository = workspace.create_request_context().get_code_location(LOCATION).get_repository("__repository__")
    partition_set = repository.get_partition_set(f"{JOB}_partition_set")
    backfill = _run_backfill(instance, workspace, PartitionBackfill(
        backfill_id=f"job-{uuid.uuid4().hex[:8]}", partition_set_origin=partition_set.get_remote_origin(),
        status=BulkActionStatus.REQUESTED, partition_names=KEYS, from_failure=False, reexecution_steps=None,
        tags={}, backfill_timestamp=time.time(),
        asset_selection=[dg.AssetKey(k) for k in asset_selection] if asset_selection else None,
    ))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    runs = _runs(instance, backfill.backfill_id)
    assert [r.tags["dagster/partition"] for r in runs] == KEYS, "one run per partition, submitted oldest first"
    assert all(r.job_name == JOB and r.tags[DEPLOYMENT_TAG] == "clickstream" for r in runs)
    assert [e["partition"] for e in epochs] == KEYS, "executed oldest first"
    assert all(e["assets"] == ALL_ASSETS for e in epochs), "every run is the whole epoch"


def test_an_asset_backfill_of_one_partition_is_one_run(daemon, epochs):
    instance, workspace = daemon
    backfill = _run_backfill(instance, workspace, _asset_backfill(instance, workspace, KEYS[:1]))

    assert backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    (run,) = _runs(instance, backfill.backfill_id)
    assert run.tags["dagster/partition"] == KEYS[0]
    assert [(e["partition"], e["assets"]) for e in epochs] == [(KEYS[0], ALL_ASSETS)]
    # A run of the implicit asset job: the epoch job's run tag is not on it; the op's `epochal` pool still is.
    assert DEPLOYMENT_TAG not in run.tags


@pytest.mark.parametrize(
    "variant", ["as-defined", "every-member-self-dependent", "every-member-self-dependent-multi-run-1"], indirect=True,
)
def test_an_asset_backfill_of_several_partitions_is_refused_by_dagster_1_13(daemon, epochs, caplog, variant):
    """The known limitation (docs/dagster.md): Dagster 1.13 fails the backfill before any run starts.

    Also with every member of the multi-asset depending on its previous partition, and with a
    BackfillPolicy of one partition per run: neither is a way around it (see the module docstring).
    """
    instance, workspace = daemon
    graph = workspace.create_request_context().asset_graph
    if variant != "as-defined":
        assert all(dg.AssetKey(k) in graph.get(dg.AssetKey(k)).parent_keys for k in ALL_ASSETS)
    if variant.endswith("multi-run-1"):
        assert graph.get(dg.AssetKey(CHECKPOINT)).backfill_policy == dg.BackfillPolicy.multi_run(1)

    with caplog.at_level(logging.INFO, logger=LOG.name):
        backfill = _run_backfill(instance, workspace, _asset_backfill(instance, workspace, KEYS[:2]))

    assert backfill.status == BulkActionStatus.FAILED
    assert "At least one run should be requested on first backfill iteration" in backfill.error.message
    assert "is requesting a different set of partitions from" in caplog.text
    assert _runs(instance, backfill.backfill_id) == [] and epochs == []
