"""Where an epoch's time goes: each step's seconds and Spark jobs in the report, each commit labelled.

The runner times every step of the epoch transaction (``EpochReport.steps``), counts the Spark jobs
each ran through a job group of its own, and labels every Delta commit with the epoch and step
(``userMetadata``, which delta-rs reads too) and names its jobs' stages (Spark's call site); the
caller's job group, description, call site and user metadata are left as they were.
"""

from __future__ import annotations

from deltalake import DeltaTable

from epochal.pipeline.steps import USER_METADATA, StepClock, step_label

from tests.pipeline.test_runner import _deploy, _runner

STEPS = ["begin", "plan", "stage:read", "stage:sum", "state:read", "state:sum", "sink:totals", "sink:log",
         "complete", "retain", "done"]


def test_each_step_is_timed_its_jobs_counted_and_its_commits_labelled(spark, tmp_path, toy_registered):
    sc = spark.sparkContext
    sc.setLocalProperty("spark.jobGroup.id", "the-callers-group")
    spark.conf.set(USER_METADATA, "the caller's metadata")
    try:
        runner = _runner(spark, _deploy(tmp_path, interval_epochs=1))
        report = runner.run(to="2026-11-01-01:00")
        assert sc.getLocalProperty("spark.jobGroup.id") == "the-callers-group"
        assert spark.conf.get(USER_METADATA) == "the caller's metadata"
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.unset(USER_METADATA)

    for epoch in report.epochs:
        assert list(epoch.steps) == STEPS
        assert sum(s["s"] for s in epoch.steps.values()) <= epoch.duration_s + 0.01  # each rounded to 1 ms
        assert epoch.spark_jobs == sum(s["jobs"] for s in epoch.steps.values())
        assert epoch.compiled_classes == sum(s["compiled"] for s in epoch.steps.values())
        assert all(s["compiled"] >= 0 for s in epoch.steps.values()) and epoch.steps["begin"]["compiled"] == 0
        assert epoch.steps["sink:totals"]["jobs"] > 0 and epoch.steps["begin"]["jobs"] == 0
        assert epoch.stages["sum"]["duration_s"] == epoch.steps["stage:sum"]["s"]

    last = report.epochs[-1]
    history = DeltaTable(runner.d.sinks["totals"].path).history()
    assert history[0]["userMetadata"] == step_label(last.epoch, last.partition, "sink:totals")
    labels = {h.get("userMetadata") for h in history}
    assert step_label(0, report.epochs[0].partition, "sink:totals") in labels

    # bench/ reads the same run back: per step the report's seconds and jobs, and the commits from the logs
    from bench.steps import summarize

    table = summarize([{"epochs": [{"reports": [e.to_dict() for e in report.epochs]}]}], [tmp_path])
    rows = {r["step"]: r for r in table["rows"]}
    assert [r["step"] for r in table["rows"]] == [*STEPS, "epoch"]
    assert rows["sink:totals"]["delta_commits"] == rows["complete"]["delta_commits"] == 1
    assert rows["begin"]["delta_commits"] == 0
    assert rows["epoch"]["spark_jobs"] == last.spark_jobs and rows["epoch"]["seconds"] == last.duration_s
    assert rows["epoch"]["compiled"] == last.compiled_classes


def test_a_steps_label_is_the_call_site_of_its_jobs_and_the_callers_comes_back(spark) -> None:
    sc, tracker = spark.sparkContext, spark.sparkContext.statusTracker()
    sc.setLocalProperty("callSite.short", "the caller's site")
    try:
        with StepClock(spark, 7, "2026-11-01-07:00", {}) as clock:
            with clock.step("stage:x"):
                assert spark.range(40, numPartitions=2).selectExpr("id % 3 AS k").groupBy("k").count().count() == 3
                spark.range(5).write.format("noop").mode("overwrite").save()
            jobs = tracker.getJobIdsForGroup(clock.job_group("stage:x"))
        assert sc.getLocalProperty("callSite.short") == "the caller's site" and sc.getLocalProperty("callSite.long") is None
    finally:
        sc.setLocalProperty("callSite.short", None)
    label = step_label(7, "2026-11-01-07:00", "stage:x")
    stages = [s for j in jobs for s in tracker.getJobInfo(j).stageIds]
    assert len(jobs) >= 2 and stages
    names = [tracker.getStageInfo(s).name for s in stages if tracker.getStageInfo(s) is not None]
    assert names and set(names) == {label}, names
