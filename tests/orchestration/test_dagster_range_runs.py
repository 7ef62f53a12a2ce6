"""A backfill's range in one run (in process, the test session's SparkSession), as Dagster's
single-run backfill policy launches it: the run carries the range's partition tags.

Each epoch of the range is reported on its own, as soon as it is done (every asset's
materialization with that epoch's numbers, both checks, a progress line), a backfill
restores before the range first, and a re-execution of a run that died half way
continues from the state's position instead of replaying what was done (one that died before
its restore runs the backfill again).
"""

from __future__ import annotations

import re

import dagster as dg
import pytest

from epochal.pipeline.checks import UPSERTS_AT_END
from epochal.pipeline.runner import EpochRunner
from tests.orchestration.test_dagster_runs import (  # noqa: F401
    KEYS, _expected, _run, _totals, deployment, run_epoch_dying_at,
)

RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
PROGRESS = re.compile(r"^epoch (\d+) of (\d+) \((\S+)\): checkpoint (\d+) completed in \d+\.\d s$")


def _range_run(defs, instance, keys, tags=None, **kwargs):
    tags = {RANGE_START: keys[0], RANGE_END: keys[-1], **(tags or {})}
    return defs.resolve_job_def("toy_epochs").execute_in_process(instance=instance, tags=tags, **kwargs)


def _progress(instance, run_id: str) -> list[tuple[int, int, str, int]]:
    lines = [PROGRESS.match(entry.user_message) for entry in instance.all_logs(run_id)]
    return [(int(m[1]), int(m[2]), m[3], int(m[4])) for m in lines if m]


def _by_partition(instance, result) -> dict[str, dict[str, object]]:
    """The run's materializations as the instance stored them (what the backfill daemon counts)."""
    out: dict[str, dict[str, object]] = {}
    for entry in instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        mat = entry.dagster_event.event_specific_data.materialization
        name = mat.asset_key.to_user_string()
        assert mat.partition not in out.get(name, {}), f"{name} {mat.partition} materialized twice"
        out.setdefault(name, {})[mat.partition] = mat
    return out


def test_a_backfill_range_in_one_run_reports_every_epoch_on_its_own(deployment, spark):
    defs, config = deployment
    with dg.instance_for_test() as instance:
        _run(defs, instance, KEYS[0])
        _run(defs, instance, KEYS[1])
        result = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf1"})
        assert result.success

        mats = _by_partition(instance, result)
        assert set(mats) == {"read", "sum", "totals", "log", "checkpoint"}
        assert all(sorted(per) == KEYS for per in mats.values()), "every asset, once per partition of the range"
        epochs = [mats["checkpoint"][k].metadata["epoch"].value for k in KEYS]
        ids = [mats["checkpoint"][k].metadata["checkpoint_id"].value for k in KEYS]
        assert epochs == [0, 1, 2] and ids == sorted(set(ids))
        checks = [(e.asset_check_evaluation_data.check_name, e.asset_check_evaluation_data.passed,
                   e.asset_check_evaluation_data.partition)
                  for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
        assert sorted(checks) == sorted((name, True, k) for name in ("checkpoint_complete", "state_consistent") for k in KEYS)
        # The upsert sink is compared with the state once, after the range's last partition; before it, each
        # partition's check names it as left to then (the append sink is checked after every partition).
        consistent = {e.asset_check_evaluation_data.partition: e.asset_check_evaluation_data.metadata
                      for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
                      and e.asset_check_evaluation_data.check_name == "state_consistent"}
        assert all(consistent[k]["totals_not_checked"].value == UPSERTS_AT_END for k in KEYS[:-1])
        assert consistent[KEYS[-1]]["totals_rows_differing"].value == 0 and "totals_not_checked" not in consistent[KEYS[-1]]
        assert all(consistent[k]["log_rows_ahead_of_state"].value == 0 for k in KEYS)
        # Each partition's check executions are its own (the UI's check history): none skipped, none without one.
        for name in ("checkpoint_complete", "state_consistent"):
            key = dg.AssetCheckKey(dg.AssetKey("checkpoint"), name)
            records = [r for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
                       if r.run_id == result.run_id]
            assert sorted((r.partition, r.status.value) for r in records) == [(k, "SUCCEEDED") for k in KEYS], name
        assert _progress(instance, result.run_id) == [(i + 1, 3, k, ids[i]) for i, k in enumerate(KEYS)]
        # The state was past the range's start: the backfill restored first (empty state: the first partition).
        restores = [e for e in result.all_events if e.event_type_value == "ASSET_OBSERVATION"
                    and "restored_epoch" in e.event_specific_data.asset_observation.metadata]
        assert restores, "a restore before the replay is recorded"
        # ... as it happens, before the range's epochs (probe 5: it was logged after the whole range, and not at all
        # when the range failed after its restore)
        kinds = [e.event_type_value for e in result.all_events]
        assert result.all_events.index(restores[-1]) < kinds.index("ASSET_MATERIALIZATION")
    assert _totals(spark, config) == _expected(3)


def test_a_reexecution_of_a_range_run_that_died_half_way_continues_from_the_state(deployment, spark, monkeypatch):
    defs, config = deployment
    original = EpochRunner.run_epoch
    died: list[int] = []

    def dies_at_the_last_epoch(self, epoch, **kwargs):
        if epoch == 2 and not died:
            died.append(epoch)
            raise RuntimeError("executor lost (test)")
        return original(self, epoch, **kwargs)

    monkeypatch.setattr(EpochRunner, "run_epoch", dies_at_the_last_epoch)
    with dg.instance_for_test() as instance:
        first = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf2"}, raise_on_error=False)
        assert not first.success
        assert sorted(_by_partition(instance, first)["checkpoint"]) == KEYS[:2], "the finished partitions show as materialized"
        assert _totals(spark, config) == _expected(2)

        again = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf2", "dagster/parent_run_id": first.run_id,
                                                  "dagster/root_run_id": first.run_id})
        assert again.success
        assert sorted(_by_partition(instance, again)["checkpoint"]) == KEYS[2:], "continued from the state, nothing replayed"
        assert not [e for e in again.all_events if e.event_type_value == "ASSET_OBSERVATION"
                    and "restored_epoch" in e.event_specific_data.asset_observation.metadata]
    assert _totals(spark, config) == _expected(3)


def test_a_reexecution_after_a_death_inside_an_epoch_records_its_recovery_as_one(deployment, spark, monkeypatch):
    """Found from outside (probe 11, 2026-12-06): a range run that died inside an epoch left the state in flight;
    its re-execution restored the latest completed checkpoint (a recovery, as after any crash) and went on, but
    the restore was labelled "restored before backfilling from" the range's first partition, which it did not
    rewind."""
    from epochal.pipeline import faults

    defs, config = deployment

    def dies() -> None:
        raise RuntimeError("executor lost inside the epoch (test)")

    monkeypatch.setattr(faults, "_die", dies)
    monkeypatch.setattr(faults, "_hits", {})
    monkeypatch.setenv("EPOCHAL_CRASH_AT", "in_stage:2")
    with dg.instance_for_test() as instance:
        first = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf7"}, raise_on_error=False)
        assert not first.success
        monkeypatch.delenv("EPOCHAL_CRASH_AT")
        again = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf7", "dagster/parent_run_id": first.run_id,
                                                  "dagster/root_run_id": first.run_id})
        assert again.success
        assert sorted(_by_partition(instance, again)["checkpoint"]) == KEYS[2:], "continued from the state"
        restores = [e.event_specific_data.asset_observation.metadata for e in again.all_events
                    if e.event_type_value == "ASSET_OBSERVATION"
                    and "restored_epoch" in e.event_specific_data.asset_observation.metadata]
        assert restores, "the recovery's restore is recorded"
        assert {m["restored_epoch"].value for m in restores} == {1}
        actions = {m["action"].value for m in restores}
        assert all(a.startswith("recovered after a run or restore that died: restored to " + KEYS[1]) for a in actions), actions
    assert _totals(spark, config) == _expected(3)


def test_a_reexecution_of_a_range_run_that_died_before_its_restore_replays_the_whole_range(deployment, spark,
                                                                                           monkeypatch):
    """Found from outside (probe 10, 2026-12-06): a backfill run killed while its JVM started left the state where
    the backfill was to rewind it from. Its re-execution took that position for its parent's progress and ran only
    the partitions after it, so a late file in the range's first partition never reached the sink."""
    defs, config = deployment
    with dg.instance_for_test() as instance:
        _run(defs, instance, KEYS[0])
        _run(defs, instance, KEYS[1])
        late = config.parent / "landing" / "dt=2026-11-01" / "hour=00" / "part-0001.jsonl"
        late.write_text('{"key": "a", "n": 100}\n')
        original = EpochRunner.run

        def dies_before_any_work(self, *args, **kwargs):
            raise RuntimeError("the JVM did not start (test)")

        monkeypatch.setattr(EpochRunner, "run", dies_before_any_work)
        first = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf4"}, raise_on_error=False)
        assert not first.success
        monkeypatch.setattr(EpochRunner, "run", original)
        again = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf4", "dagster/parent_run_id": first.run_id,
                                                  "dagster/root_run_id": first.run_id})
        assert again.success
        assert sorted(_by_partition(instance, again)["checkpoint"]) == KEYS, "the whole range, as a new backfill"
        assert [e for e in again.all_events if e.event_type_value == "ASSET_OBSERVATION"
                and "restored_epoch" in e.event_specific_data.asset_observation.metadata], "restored first"
    assert _totals(spark, config) == {**_expected(3), "a": _expected(3)["a"] + 100}


def test_a_reexecution_of_a_range_run_that_succeeded_replays_the_range_wherever_the_state_is_now(deployment, spark):
    """Found from outside (probe 11, 2026-12-06): a replay of one partition had moved the state back into the range
    of a backfill run that had succeeded; re-executing that run continued from the state, as if it had died there,
    and a late file in the range's first partition never reached the sink."""
    defs, config = deployment
    with dg.instance_for_test() as instance:
        first = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf5"})
        _run(defs, instance, KEYS[1], {"dagster/backfill": "one"})  # the state back at KEYS[1]
        late = config.parent / "landing" / "dt=2026-11-01" / "hour=00" / "part-0001.jsonl"
        late.write_text('{"key": "a", "n": 100}\n')
        again = _range_run(defs, instance, KEYS, {"dagster/backfill": "bf5", "dagster/parent_run_id": first.run_id,
                                                  "dagster/root_run_id": first.run_id})
        assert sorted(_by_partition(instance, again)["checkpoint"]) == KEYS, "the whole range, as a new backfill"
    assert _totals(spark, config) == {**_expected(3), "a": _expected(3)["a"] + 100}


def test_a_backfill_that_dies_after_its_restore_has_marked_the_partitions_after_its_range_out_of_date(
        deployment, spark, monkeypatch):
    """Found from outside (probe 11, 2026-12-06): the partitions after the range were marked out of date at the
    run's end only, so a run that died after its restore left them showing as materialized, the state before them,
    and its re-execution (which starts inside the range) never marked them either."""
    defs, _ = deployment
    with dg.instance_for_test() as instance:
        for key in KEYS:
            _run(defs, instance, key)
        monkeypatch.setattr(EpochRunner, "run_epoch", run_epoch_dying_at(1))
        died = _range_run(defs, instance, KEYS[:2], {"dagster/backfill": "bf6"}, raise_on_error=False)
        assert not died.success
        marked = [e.dagster_event.partition for e in instance.all_logs(died.run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION)
                  if "out_of_date" in e.dagster_event.asset_observation_data.asset_observation.metadata]
        assert marked == [KEYS[2]]


@pytest.mark.parametrize("tags", [{}, {"dagster/backfill": "bf3"}], ids=["ahead-of-the-state", "backfill-from-empty"])
def test_a_range_from_the_beginning_runs_in_order(deployment, spark, tags):
    defs, config = deployment
    with dg.instance_for_test() as instance:
        result = _range_run(defs, instance, KEYS[:2], tags)
        assert result.success
        assert sorted(_by_partition(instance, result)["totals"]) == KEYS[:2]
    assert _totals(spark, config) == _expected(2)
