"""The clickstream stages end to end over three generated hours, checked against the pure-Python reference.

The epoch runner is not used: a few lines below play its part (state backends
under tmp_path, one StageContext per stage and epoch, stages in DAG order,
sink outputs collected per epoch, upsert sinks keyed). One module fixture runs
the epochs; the tests assert on what it collected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from epochal.config import Settings
from epochal.pipeline.examples.clickstream import reference as ref
from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
from epochal.pipeline.examples.clickstream.layout import hour_dir, partition_window
from epochal.pipeline.examples.clickstream.pipeline import build_pipeline
from epochal.pipeline.examples.clickstream.stages import SESSION, SessionStage, merge_session_spans
from epochal.pipeline.stage import EpochInfo, SinkMode, StageContext
from epochal.state.backends.keyed import KeyedStateBackend
from epochal.state.backends.operator import OperatorStateBackend, OperatorStateStore
from epochal.state.backends.timers import EventTimeTimers

UTC = timezone.utc
T0 = datetime(2026, 11, 1, 10, tzinfo=UTC)
PARTITIONS = ["2026-11-01-10:00", "2026-11-01-11:00", "2026-11-01-12:00"]
TTL = timedelta(hours=2)  # short, so that an id seen in the first epoch is distinct again in the third
PARALLELISM = 2


# ----------------------------------------------------------------------------- landing data

def _line(event_id: str, user: str, when: datetime, event_type: str = "view", amount: float | None = None) -> str:
    obj = {"event_id": event_id, "user_id": user, "event_type": event_type, "event_time": when.isoformat()}
    if amount is not None:
        obj["amount"] = amount
    return json.dumps(obj)


def _at(minutes: float, offset_hours: int = 0) -> datetime:
    return (T0 + timedelta(minutes=minutes)).astimezone(timezone(timedelta(hours=offset_hours)))


ZT1 = _line("zt-1", "zt", _at(10))  # the same line in all three epochs: duplicate, then distinct again (TTL)
#: Hand-written lines per epoch, added to the generated hour (users ``z*`` are not the generator's).
SCENARIO = {
    PARTITIONS[0]: [
        _line("zb-1", "zb", _at(0)),  # zb: two sessions, 40 minutes apart ...
        _line("zb-2", "zb", _at(40), "purchase", 12.5),
        _line("zq-1", "zq", _at(5, 2), "purchase", 3.25),  # zq: its only event (shown at +02:00)
        _line("zc-1", "zc", _at(59.5)),  # pins the watermark: 10:59:30 - 1h
        ZT1,
        _line("zd-1", "zd", _at(30)),
        _line("zd-1", "zd", _at(30)),  # the same event twice in one epoch
    ],
    PARTITIONS[1]: [
        _line("zb-3", "zb", _at(20), "add_to_cart"),  # ... bridged by an on-time event (W = 09:59:30)
        _line("zl-1", "zl", _at(-60), "purchase", 7.0),  # 09:00 < W: late
        ZT1,  # 1h after its acceptance: a duplicate
        _line("zc-2", "zc", _at(119.5)),  # W -> 10:59:30: zq's session (10:05 + 30 min) closes, zq idle
    ],
    PARTITIONS[2]: [
        ZT1,  # 2h after its acceptance: distinct again (strict TTL), and late (10:10 < W = 10:59:30)
        _line("zc-3", "zc", _at(179.5)),  # W -> 11:59:30: zb's bridged session (ends 10:40) closes, zb idle
    ],
}


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("clickstream") / "landing")
    config = GeneratorConfig(users=8, events_per_hour=40, duplicate_rate=0.1, late_rate=0.1, malformed_rate=0.1, seed=7)
    generate(root, T0, len(PARTITIONS), config)
    for i, partition in enumerate(PARTITIONS):
        folder = Path(hour_dir(root, T0 + timedelta(hours=i)))
        (folder / "part-9000.jsonl").write_text("".join(line + "\n" for line in SCENARIO[partition]))
    return root


# ----------------------------------------------------------------------------- a tiny runner

TS_COLUMNS = {"event_time", "first_event_time", "last_event_time", "hour", "session_start", "session_end"}


def _to_pandas(df) -> pd.DataFrame:
    """Collect with timestamps as UTC instants (independent of the session time zone)."""
    cols = [F.unix_micros(c).alias(c) if c in TS_COLUMNS else F.col(c) for c in df.columns]
    frame = df.select(*cols).toPandas()
    for c in frame.columns:
        if c in TS_COLUMNS:
            frame[c] = pd.to_datetime(frame[c].astype("Int64"), unit="us", utc=True).astype(ref.TIMESTAMP_DTYPE)
    return frame


@dataclass
class Run:
    per_epoch: list[dict[str, pd.DataFrame]] = field(default_factory=list)  # sink -> rows written that epoch
    upserts: dict[str, pd.DataFrame] = field(default_factory=dict)  # upsert sink -> last row per key
    views: dict[str, pd.DataFrame] = field(default_factory=dict)  # upsert sink -> stage.view() at the end
    keyed: dict[str, KeyedStateBackend] = field(default_factory=dict)  # stage -> its keyed state

    def appended(self, sink: str) -> pd.DataFrame:
        return pd.concat([e[sink] for e in self.per_epoch], ignore_index=True)


def run_epochs(spark, pipeline, root: str, partitions: list[str]) -> Run:
    stages = pipeline.ordered_stages
    keyed = {s.name: KeyedStateBackend(spark, f"{root}/keyed", s.name, max_parallelism=pipeline.max_parallelism) for s in stages}
    operator = {s.name: OperatorStateStore(OperatorStateBackend(spark, f"{root}/operator", s.name), PARALLELISM) for s in stages}
    run = Run(keyed=keyed)
    for epoch, partition in enumerate(partitions, start=1):
        info = EpochInfo(epoch, partition, *partition_window(partition))
        outputs: dict[str, object] = {src.name: src.plan(info) for src in pipeline.sources}
        for stage in stages:
            keyed[stage.name].begin_epoch(epoch, info.clock)
            ctx = StageContext(spark, info, keyed[stage.name], operator[stage.name], PARALLELISM)
            produced = stage.process(ctx, {ref_: outputs[ref_] for ref_ in stage.inputs})
            outputs.update({f"{stage.name}.{name}": df for name, df in produced.items()})
            operator[stage.name].snapshot()  # as the runner: state written before the sinks read the outputs
        written = {sink.name: _to_pandas(outputs[sink.input]) for sink in pipeline.sinks}
        run.per_epoch.append(written)
        for sink in pipeline.sinks:
            if sink.mode is SinkMode.UPSERT:
                rows = pd.concat([run.upserts.get(sink.name), written[sink.name]], ignore_index=True)
                run.upserts[sink.name] = rows.drop_duplicates(list(sink.keys), keep="last")
        for stage in stages:
            getattr(stage, "release", lambda: None)()
    by_output = {f"{s.name}.{o}": s for s in stages for o in s.outputs}
    for sink in pipeline.sinks:
        if sink.mode is SinkMode.UPSERT:
            stage = by_output[sink.input]
            ctx = StageContext(spark, info, keyed[stage.name], operator[stage.name], PARALLELISM)
            run.views[sink.name] = _to_pandas(stage.view(ctx, sink.input.split(".", 1)[1]))
    return run


@pytest.fixture(scope="module")
def run(spark, landing, tmp_path_factory) -> Run:
    settings = Settings(landing=landing, options={"dedupe_ttl": TTL})
    return run_epochs(spark, build_pipeline(settings), str(tmp_path_factory.mktemp("state")), PARTITIONS)


@pytest.fixture(scope="module")
def reference(landing) -> ref.ReferencePipeline:
    pipeline = ref.ReferencePipeline(dedupe_ttl=TTL)
    for partition in PARTITIONS:
        pipeline.run_epoch(partition, ref.read_partition(landing, partition))
    return pipeline


# ----------------------------------------------------------------------------- comparing frames

LATE_COLUMNS = ["event_id", "user_id", "event_type", "amount", "event_time", "partition"]


def assert_same_rows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same rows in any order; floats within a relative 1e-9, timestamps as UTC instants."""
    assert list(actual.columns) == list(expected.columns)
    assert len(actual) == len(expected), f"{len(actual)} rows, expected {len(expected)}"
    if expected.empty:
        return
    actual = actual.astype(expected.dtypes.to_dict())
    key = list(expected.columns)
    a = actual.sort_values(key, ignore_index=True)
    e = expected.sort_values(key, ignore_index=True)
    pd.testing.assert_frame_equal(a, e, check_exact=False, rtol=1e-9, atol=0.0)


# ----------------------------------------------------------------------------- the tests

def test_every_sink_equals_the_reference(run, landing) -> None:
    expected = ref.expected_sinks(landing, PARTITIONS, dedupe_ttl=TTL)
    assert_same_rows(run.appended("quarantine"), expected["quarantine"])
    assert_same_rows(run.appended("sessions"), expected["sessions"])
    assert_same_rows(run.appended("late_events"), expected["late_events"][LATE_COLUMNS])
    for sink in ("user_totals", "hourly_revenue"):
        assert_same_rows(run.upserts[sink], expected[sink])


def test_each_epoch_emits_what_the_reference_emits(run, reference) -> None:
    for written, result in zip(run.per_epoch, reference.history, strict=True):
        assert_same_rows(written["sessions"], ref.sessions_frame(result.emitted))
        assert_same_rows(written["late_events"], ref.events_frame(result.late)[LATE_COLUMNS])
        assert_same_rows(written["quarantine"], ref.quarantine_frame(result.parsed.quarantine))


def test_upsert_sinks_write_only_changed_keys_and_views_rebuild_them(run, reference) -> None:
    for written, result in zip(run.per_epoch, reference.history, strict=True):
        assert sorted(written["user_totals"]["user_id"]) == sorted({e.user_id for e in result.distinct})
        assert len(written["hourly_revenue"]) == len({e.event_time.replace(minute=0, second=0, microsecond=0) for e in result.distinct})
    for sink in ("user_totals", "hourly_revenue"):
        assert_same_rows(run.views[sink], run.upserts[sink])


def _rows(frame: pd.DataFrame, **where) -> list[dict]:
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column] == value
    return frame[mask].to_dict("records")


def test_scenario_idle_users_sessions_close_and_a_bridging_event_merges_two(run) -> None:
    ts = lambda minutes: pd.Timestamp(T0 + timedelta(minutes=minutes))  # noqa: E731
    e1, e2, e3 = run.per_epoch
    assert _rows(e1["sessions"], user_id="zq") == [] and _rows(e2["sessions"], user_id="zb") == []
    # zq has no event in epoch 2, yet its session closes there (due at the watermark: end + gap < W)
    assert _rows(e2["sessions"], user_id="zq") == [
        {"user_id": "zq", "session_start": ts(5), "session_end": ts(5), "events": 1, "revenue": 3.25}
    ]
    # zb's two sessions (10:00, 10:40) were bridged by 10:20 in epoch 2 and close, zb idle, in epoch 3
    assert _rows(e3["sessions"], user_id="zb") == [
        {"user_id": "zb", "session_start": ts(0), "session_end": ts(40), "events": 3, "revenue": 12.5}
    ]


def test_scenario_late_events_and_dedupe_ttl(run) -> None:
    e1, e2, e3 = run.per_epoch
    assert e1["late_events"].empty  # nothing is late in the first epoch
    assert list(e2["late_events"].query("user_id == 'zl'")["event_id"]) == ["zl-1"]
    assert list(e3["late_events"].query("user_id == 'zt'")["event_id"]) == ["zt-1"]  # distinct again after 2h
    assert _rows(run.upserts["user_totals"], user_id="zt")[0]["events"] == 2
    assert _rows(run.upserts["user_totals"], user_id="zd")[0]["events"] == 1
    assert _rows(run.upserts["user_totals"], user_id="zl")[0]["revenue"] == 7.0  # late, still counted


def test_open_sessions_are_the_references_and_the_stage_keeps_no_timer_table(run, reference) -> None:
    """After the last epoch the open sessions equal the reference's; the due ones are found in them, so the
    stage's keyed state is its open sessions alone (no second table that says when they are due), and the
    latest end among them is the reference's largest event time, the watermark's source (no operator state)."""
    stage = next(s for s in build_pipeline(Settings()).stages if isinstance(s, SessionStage))
    assert [d.name for d in stage.keyed_state] == ["open_sessions"]
    assert list(stage.operator_state) == []
    backend = run.keyed[stage.name]
    state = backend.values(stage.open_sessions).select(F.col("key").alias("user_id"), F.explode("value").alias("s"))
    actual = _to_pandas(state.select("user_id", F.col("s.start").alias("session_start"), F.col("s.end").alias("session_end"),
                                     F.col("s.events").alias("events"), F.col("s.revenue").alias("revenue")))
    expected = ref.sessions_frame(s for sessions in reference.open_sessions.values() for s in sessions)
    assert len(expected) > 0
    assert_same_rows(actual, expected)
    assert actual["session_end"].max() == pd.Timestamp(reference.max_event_time)


# ----------------------------------------------------------------------------- smaller parts

def test_strict_ttl_in_the_reference() -> None:
    """Flink's TTL: an id accepted at clock t is a duplicate while clock - t < ttl."""
    p = ref.ReferencePipeline(dedupe_ttl=timedelta(hours=2))
    files = lambda *lines: {"part-0000.jsonl": "".join(l + "\n" for l in lines).encode()}  # noqa: E731, E741
    x, y = _line("x", "u1", _at(0)), _line("y", "u1", _at(1))
    assert [e.event_id for e in p.run_epoch("2026-11-01-10:00", files(x, x, y)).distinct] == ["x", "y"]  # clock 11:00
    assert p.run_epoch("2026-11-01-11:00", files(x)).distinct == []  # 1h < 2h
    again = p.run_epoch("2026-11-01-12:00", files(x, y)).distinct  # 2h: not < 2h, distinct again
    assert [e.event_id for e in again] == ["x", "y"]
    assert p.run_epoch("2026-11-01-13:00", files(x)).distinct == []  # accepted again at 13:00


def test_session_spans_merge_within_the_gap_and_bridge(spark) -> None:
    t = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    span = lambda a, b, n, r: (t(a), t(b), n, r)  # noqa: E731
    schema = T.StructType([T.StructField("spans", T.ArrayType(SESSION))])
    rows = [
        ([span(40, 40, 1, 0.0), span(0, 10, 2, 1.5), span(25, 25, 1, 2.0)],),  # 25 bridges [0,10] and 40 (gap <= 30)
        ([span(0, 0, 1, 0.0), span(30, 30, 1, 0.0), span(60.5, 60.5, 1, 1.0)],),  # exactly 30 min joins, 30.5 splits
        ([],),
    ]
    out = spark.createDataFrame(rows, schema).select(merge_session_spans(F.col("spans"), timedelta(minutes=30)).alias("s"))
    got = [[(s.start, s.end, s.events, s.revenue) for s in row.s] for row in out.collect()]
    as_utc = lambda spans: [(a.astimezone(UTC), b.astimezone(UTC), n, r) for a, b, n, r in spans]  # noqa: E731
    assert [as_utc(spans) for spans in got] == [
        [(t(0), t(40), 4, 3.5)],
        [(t(0), t(30), 2, 0.0), (t(60.5), t(60.5), 1, 1.0)],
        [],
    ]


def test_event_time_timers_fire_once_the_watermark_reaches_them(spark, tmp_path) -> None:
    backend = KeyedStateBackend(spark, str(tmp_path), "timers_test")
    backend.begin_epoch(1, T0)
    timers = EventTimeTimers.declare()
    at = lambda minutes: T0 + timedelta(minutes=minutes)  # noqa: E731
    rows = [("a", at(10)), ("a", at(50)), ("b", at(30)), ("a", at(10))]
    timers.register(backend, spark.createDataFrame(rows, "key string, timestamp timestamp"))
    fired = timers.fire(backend, at(30))  # due: timestamp <= watermark
    assert sorted((r.key, r.timestamp.astimezone(UTC)) for r in fired.collect()) == [("a", at(10)), ("b", at(30))]
    assert [(r.key, r.timestamp.astimezone(UTC)) for r in timers.read(backend).collect()] == [("a", at(50))]
