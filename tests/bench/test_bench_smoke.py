"""A tiny run of the benchmark harness (bench/): the checkpoint-bytes part in this process, then the report.

``make bench`` runs the real sizes in child processes; this checks the harness
itself: the synthetic churn pipeline runs through the epoch runner, bytes are
measured against the changed rows, and the results become markdown and PNGs.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytest.importorskip("matplotlib", reason="the bench extra (pip install -e '.[bench]') draws the plots")

from bench import churn  # noqa: E402
from bench.report import targets, write_report  # noqa: E402
from epochal.pipeline.registry import PIPELINES  # noqa: E402

KEYS = 2_000


@pytest.mark.slow
def test_churn_part_and_report(spark, tmp_path):
    try:
        incremental = churn.run(tmp_path / "incremental", KEYS, [1.0, 0.01], "incremental")
        full = churn.run(tmp_path / "full", KEYS, [1.0, 0.01], "full")
    finally:
        PIPELINES.pop("bench_churn", None)
    load, hundredth = incremental["epochs"]
    assert [e["checkpoint"] for e in incremental["epochs"]] == ["completed", "completed"]
    assert load["state_rows"] == hundredth["state_rows"] == KEYS
    # 1% of the keys changed: an incremental checkpoint writes about those rows, a full one the whole state
    assert 0 < hundredth["changed_row_bytes"] < load["changed_row_bytes"]
    assert 0 < hundredth["bytes_written"] < load["bytes_written"]
    assert full["epochs"][1]["bytes_written"] > hundredth["bytes_written"]

    section = churn.summarize([incremental], full)
    assert section["incremental"]["0.01"]["ratio"] == round(hundredth["bytes_written"] / hundredth["changed_row_bytes"], 3)
    written = write_report({"churn": section}, tmp_path / "results")
    assert {p.name for p in written} == {"results.md", "checkpoint_bytes.png"}
    assert all(p.stat().st_size > 0 for p in written)
    table = (tmp_path / "results" / "results.md").read_text()
    assert f"| 1% | {hundredth['bytes_written']} | {hundredth['changed_row_bytes']} |" in table
    (target,) = targets({"churn": section})
    assert target["value"] == section["incremental"]["0.01"]["ratio"] and target["limit"] == 3.0


def test_the_event_log_is_one_plain_file_that_bench_profile_reads(tmp_path, monkeypatch):
    """Spark 4 writes rolling, zstd-compressed event-log folders by default; bench.profile reads plain JSON lines."""
    from bench.common import spark_settings

    conf = spark_settings(event_log=str(tmp_path / "events")).conf
    assert conf["spark.eventLog.enabled"] == "true"
    assert (conf["spark.eventLog.compress"], conf["spark.eventLog.rolling.enabled"]) == ("false", "false")
    monkeypatch.delenv("EPOCHAL_BENCH_EVENT_LOG", raising=False)
    assert "spark.eventLog.enabled" not in spark_settings().conf


def _job_events(job_id: int, site: str, start: int, end: int) -> str:
    import json

    return "\n".join(json.dumps(e) for e in (
        {"Event": "SparkListenerJobStart", "Job ID": job_id, "Submission Time": start, "Stage IDs": [job_id],
         "Properties": {"callSite.short": site}},
        {"Event": "SparkListenerJobEnd", "Job ID": job_id, "Completion Time": end},
    )) + "\n"


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command")
def test_bench_profile_reads_a_rolling_zstd_event_log_folder_in_order(tmp_path):
    """Spark 4's default event log: a folder of events_<n>_<app>.zstd parts (part 10 after part 2)."""
    from bench.profile import read_jobs

    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    for n, (job, site) in {1: (0, "stage:a"), 2: (1, "stage:b"), 10: (2, "sink:c")}.items():
        plain = folder / f"events_{n}_local-1"
        plain.write_text(_job_events(job, site, 1000 * n, 1000 * n + 500))
        subprocess.run(["zstd", "-q", "--rm", str(plain), "-o", f"{plain}.zstd"], check=True)
    (folder / "appstatus_local-1").write_text("")
    assert [(j.job_id, j.call_site, j.seconds) for j in read_jobs(folder)] == [(0, "stage:a", 0.5), (1, "stage:b", 0.5), (2, "sink:c", 0.5)]


def test_bench_profile_names_a_codec_it_cannot_read(tmp_path):
    from bench.profile import read_jobs

    log = tmp_path / "events_1_local-1.lz4"
    log.write_bytes(b"\x00")
    with pytest.raises(SystemExit, match=r"compressed with lz4.*spark.eventLog.compress=false"):
        read_jobs(log)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="no events_<n>_<app> files"):
        read_jobs(tmp_path / "empty")


def test_the_backfill_rounds_report_the_median_round_and_each_rounds_daemon_waits(tmp_path):
    from bench.backfill import median_round

    def round_(delay, wall, to_run, after_run):
        return {"status": "COMPLETED_SUCCESS", "runs": 1, "wall_s": wall, "epochs_sum_s": 100.0, "delay_s": delay,
                "daemon_waits": {"to_first_run_s": to_run, "after_last_run_s": after_run},
                "ratio_with_session_start": round(wall / 105.0, 3)}

    rounds = [round_(5.0, 150.0, 27.0, 9.0), round_(15.0, 130.0, 16.0, 9.0), round_(25.0, 120.0, 6.0, 9.0)]
    assert median_round(rounds) is rounds[1]
    assert median_round(rounds[:2]) is rounds[0]  # of two, the higher
    section = {"events": 5000, "partitions": 24, "one_run": median_round(rounds), "one_run_rounds": rounds,
               "session_start_s": 5.0, "one_run_vs_its_epochs": 1.3, "one_run_vs_run_per_epoch": None,
               "one_run_vs_its_epochs_and_a_session_start": rounds[1]["ratio_with_session_start"], "measured_at": "now"}
    write_report({"backfill": section}, tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "| 1 | 5.0 | 150.0 | 100.0 | 27.0 | 9.0 | 1.429 |" in text
    assert "| one_run | COMPLETED_SUCCESS | 1 | 130.0 | 100.0 |" in text
    (target,) = targets({"backfill": section})
    assert target["value"] == 1.238
