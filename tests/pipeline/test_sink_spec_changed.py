"""A SinkSpec changed since its table was written (a column added, say): refused before the run's first epoch.

Found by writing a pipeline from the README alone (2026-12-05): the refusal came at the sink's write, after the
stages had written their state, and its way out began with a restore. Now no stage runs and no table changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from pyspark.sql import types as T

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.errors import SinkSchemaError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.delta.log import DeltaLog
from tests.pipeline.test_user_mistakes import FIRST, _runner


def test_a_sink_spec_changed_since_its_table_was_written_is_refused_before_any_stage_runs(spark, tmp_path,
                                                                                          toy_registered):
    """A column added to a SinkSpec was refused at the sink's write, after the stages had written their state (probe,
    2026-12-05): now before the run's first epoch, and the way out needs no restore."""
    runner = _runner(spark, tmp_path)
    runner.run(to=FIRST)
    toy.write_hour(tmp_path / "landing", 1, [("a", 5)])
    again = EpochRunner(build_deployment(load_settings(tmp_path / "epochal.yaml"), spark))
    totals = again.d.sinks["totals"]
    wider = T.StructType(list(toy.TOTALS.fields) + [T.StructField("avg", T.DoubleType())])
    totals.spec = dataclasses.replace(totals.spec, schema=wider)
    # every Delta table of the deployment: the state's (working tables, checkpoint store) and both sinks'
    logs = [DeltaLog(str(p.parent)) for p in tmp_path.glob("**/_delta_log")]
    versions = [log.latest_version() for log in logs]
    assert len(logs) >= 4
    with pytest.raises(SinkSchemaError) as refused:
        again.run(to="2026-11-01-01:00")
    first_line = str(refused.value).splitlines()[0]
    assert first_line.startswith("sink 'totals' refused before epoch 1 (partition 2026-11-01-01:00): its table "), first_line
    assert "(missing from the table: avg DOUBLE); no epoch ran." in first_line, first_line
    assert "add the column(s) to the table (ALTER TABLE delta." in first_line and "epochal restore" not in first_line
    assert [log.latest_version() for log in logs] == versions  # no stage ran, no state or sink was written
    assert again.d.progress.load().last_done_epoch == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_restore_to_before_an_append_sink_was_added_empties_it_through_the_cli(spark, tmp_path, toy_registered):
    """Found from outside (probe 15): a checkpoint taken before an append sink was added holds no version of it, so
    a restore to it rewinds that sink by content. The ``restore`` command, whose Spark starts only when a restore
    needs it, built the rewind's condition before the session existed and failed with a bare AssertionError; the
    next run did the restore again and failed the same way, for good."""
    from deltalake import DeltaTable

    from epochal.pipeline.registry import PIPELINES
    from tests.pipeline.test_user_mistakes import _config
    from tests.support.paths import child_env

    full = PIPELINES["toy"]
    PIPELINES["toy"] = lambda settings: dataclasses.replace(full(settings), sinks=full(settings).sinks[:1])  # no log
    try:
        runner = _runner(spark, tmp_path)
        runner.run(to=FIRST)
    finally:
        PIPELINES["toy"] = full
    toy.write_hour(tmp_path / "landing", 1, [("a", 5)])
    EpochRunner(build_deployment(load_settings(tmp_path / "epochal.yaml"), spark)).run(to="2026-11-01-01:00")
    log_table = tmp_path / "warehouse" / "log"
    assert DeltaLog(str(log_table)).latest_version() is not None
    code = "import sys, tests.support.toy_pipeline as t; t.register(); from epochal.orchestration.cli import main; sys.exit(main(sys.argv[1:]))"
    restored = subprocess.run([sys.executable, "-c", code, "restore", "--checkpoint", "1", "--json",
                               "--config", str(_config(tmp_path, tmp_path / "landing"))],
                              capture_output=True, text=True, timeout=240, env=child_env(dict(os.environ)))
    assert restored.returncode == 0, restored.stderr[-3000:]
    assert "log" in json.loads(restored.stdout)["sinks_by_content"]
    assert DeltaTable(str(log_table)).to_pyarrow_table().num_rows == 0, "the log's rows of epoch 1 are rewound"
    assert DeltaTable(str(tmp_path / "warehouse" / "totals")).to_pyarrow_table().to_pylist() == [
        {"key": "a", "total": 1}, {"key": "b", "total": 2}]


def test_a_sinks_changed_mode_is_named_as_such(spark, tmp_path, toy_registered):
    """Found from outside (probe 15): a sink turned from UPSERT to APPEND was refused as a column to add, and the
    ALTER it advised would have left the old rows with a null epoch in an append table."""
    from epochal.pipeline.stage import SinkMode

    runner = _runner(spark, tmp_path)
    runner.run(to=FIRST)
    toy.write_hour(tmp_path / "landing", 1, [("a", 5)])
    for name, mode, keys, old in (("log", SinkMode.UPSERT, ("key",), "APPEND"), ("totals", SinkMode.APPEND, (), "UPSERT")):
        again = EpochRunner(build_deployment(load_settings(tmp_path / "epochal.yaml"), spark))
        sink = again.d.sinks[name]
        sink.spec = dataclasses.replace(sink.spec, mode=mode, keys=keys)
        with pytest.raises(SinkSchemaError) as refused:
            again.run(to="2026-11-01-01:00")
        first_line = str(refused.value).splitlines()[0]
        assert f"its mode changed: the SinkSpec is {mode.name}, the table was written by an {old} sink" in first_line, first_line
        assert f"change the SinkSpec's mode back to {old}" in first_line and "ALTER TABLE" not in first_line, first_line
