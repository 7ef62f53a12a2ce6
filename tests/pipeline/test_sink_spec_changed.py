"""A SinkSpec changed since its table was written (a column added, say): refused before the run's first epoch.

Found by writing a pipeline from the README alone (2026-12-05): the refusal came at the sink's write, after the
stages had written their state, and its way out began with a restore. Now no stage runs and no table changes.
"""

from __future__ import annotations

import dataclasses

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
