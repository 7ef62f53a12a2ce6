"""A stage learns which of its outputs nobody reads (``ctx.is_read``), and may skip the work that serves only
those: the clickstream parse stage holds (persists) its classified lines only when both its outputs are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from epochal.config import Settings, SparkSettings
from epochal.pipeline.dag import Pipeline
from epochal.pipeline.examples.clickstream import stages as S
from epochal.pipeline.examples.clickstream.pipeline import SINKS, build_pipeline
from epochal.pipeline.registry import PIPELINES, build_deployment
from epochal.pipeline.sources import HourlyFolderSource

LINES = [
    {"event_id": "e1", "user_id": "u1", "event_type": "view", "event_time": "2026-11-01T00:05:00Z"},
    {"event_id": "e2", "user_id": "u2", "event_type": "purchase", "amount": 3.5, "event_time": "2026-11-01T00:06:00Z"},
    {"event_id": "e2", "user_id": "u2", "event_type": "purchase", "amount": 3.5, "event_time": "2026-11-01T00:06:00Z"},
    {"event_id": "e3", "user_id": "u1", "event_type": "teleport", "event_time": "2026-11-01T00:07:00Z"},
]


def _without_quarantine(settings: Settings) -> Pipeline:
    """The clickstream stages up to the aggregates and their two sinks: no stage or sink reads parse.quarantine."""
    full = build_pipeline(settings)
    stages = [s for s in full.stages if s.name != S.SESSIONIZE]
    sinks = [s for s in SINKS if s.name in ("user_totals", "hourly_revenue")]
    return Pipeline(name="no_quarantine", sources=full.sources, stages=stages, sinks=sinks)


def test_unread_outputs_come_from_the_stages_and_sinks_that_read_them(tmp_path):
    settings = Settings(landing=str(tmp_path))
    full = build_pipeline(settings)
    assert {s.name: full.unread_outputs(s) for s in full.stages} == {s.name: frozenset() for s in full.stages}
    dedupe = next(s for s in full.stages if s.name == S.DEDUPE)
    assert full.readers(dedupe, "distinct") == 3  # users, hours and sessions: the runner persists it
    core = _without_quarantine(settings)
    assert {s.name: core.unread_outputs(s) for s in core.stages} == {
        S.PARSE: {"quarantine"}, S.DEDUPE: frozenset(), S.USERS: frozenset(), S.HOURS: frozenset(),
    }

    class One:
        name, inputs, outputs, keyed_state, operator_state = "one", ("landing",), ("rows",), (), ()

    class ByName(One):
        name, inputs, outputs = "reader", ("one",), ("out",)

    lone = Pipeline(name="lone", sources=[HourlyFolderSource("landing", str(tmp_path))], stages=[One(), ByName()], sinks=[])
    assert lone.unread_outputs(lone.stages[0]) == frozenset()  # read by the stage's name: "one"
    assert lone.unread_outputs(lone.stages[1]) == {"out"}


@pytest.fixture()
def landing(tmp_path: Path) -> Path:
    folder = tmp_path / "landing" / "dt=2026-11-01" / "hour=00"
    folder.mkdir(parents=True)
    (folder / "part-0000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in LINES) + "not json\n")
    return tmp_path / "landing"


@pytest.mark.parametrize("with_quarantine", [True, False])
def test_the_parse_stage_holds_its_lines_only_when_both_outputs_are_read(spark, tmp_path, landing, monkeypatch, with_quarantine):
    monkeypatch.setitem(PIPELINES, "no_quarantine", _without_quarantine)
    settings = Settings(
        pipeline="clickstream" if with_quarantine else "no_quarantine", landing=str(landing),
        warehouse=str(tmp_path / "warehouse"), checkpoints={"dir": str(tmp_path / "checkpoints")},
        partitions={"start": "2026-11-01T00:00:00Z"}, spark=SparkSettings(master="local[2]", parallelism=2),
    )
    d = build_deployment(settings, spark)
    parse = next(s for s in d.pipeline.stages if s.name == S.PARSE)
    ctx = d.context(parse, 0)
    assert ctx.is_read("events") and ctx.is_read("quarantine") is with_quarantine
    source = d.pipeline.sources[0]
    outputs = parse.process(ctx, {source.name: source.plan(ctx.info)})
    try:
        assert len(parse._held.frames) == (1 if with_quarantine else 0)
        assert sorted(r.event_id for r in outputs["events"].collect()) == ["e1", "e2", "e2"]
        assert sorted(r.reason for r in outputs["quarantine"].collect()) == ["not_json", "unknown_event_type"]
    finally:
        parse.release()
