"""A user's mistakes get an error that names what is wrong and where, and nothing is run or lost.

Each found by writing a pipeline from the README alone (2026-11-30): a stage returning the wrong output name or
``None``, a row without a key written to keyed state, a sink value Spark cannot cast, and a landing folder that
does not exist (which used to run empty epochs, done for good, so that the data landing there later was never
read); the same for a partition whose window has not closed. Commands refused before any work (that landing
folder, that window, a bad range, changed partitions): test_refused_before_work.py. Mistakes in a pipeline's
definition, refused when it is built: test_definition_mistakes.py.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.sql import types as T

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.errors import SinkError, StageError
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from epochal.state.descriptors import ValueStateDescriptor
from epochal.state.session import QUERY_CONTEXT_LOGGERS

EPOCHAL = str(Path(sys.executable).with_name("epochal"))
FIRST = "2026-11-01-00:00"


def _config(tmp: Path, landing: Path) -> Path:
    config = {
        "pipeline": "toy",
        "landing": str(landing),
        "warehouse": str(tmp / "warehouse"),
        "checkpoints": {"dir": str(tmp / "checkpoints")},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    path = tmp / "epochal.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _runner(spark, tmp: Path, stage_class=None) -> EpochRunner:
    toy.write_hour(tmp / "landing", 0, [("a", 1), ("b", 2)])
    runner = EpochRunner(build_deployment(load_settings(_config(tmp, tmp / "landing")), spark))
    if stage_class is not None:
        runner.d.pipeline.stages[1].__class__ = stage_class
    return runner


class WrongName(toy.Sum):
    def process(self, ctx, inputs):
        return {"total": super().process(ctx, inputs)["totals"]}


class NoFrame(toy.Sum):
    def process(self, ctx, inputs):
        super().process(ctx, inputs)
        return {"totals": None}


class Uncastable(toy.Sum):
    def process(self, ctx, inputs):
        totals = super().process(ctx, inputs)["totals"]
        return {"totals": totals.withColumn("total", F.concat(F.lit("x"), F.col("total").cast("string")))}


class LacksColumn(toy.Sum):
    def process(self, ctx, inputs):
        return {"totals": super().process(ctx, inputs)["totals"].withColumnRenamed("total", "sum")}


@pytest.mark.parametrize(("stage_class", "error", "message"), [
    (WrongName, StageError, r"stage 'sum' failed at epoch 0 \(partition 2026-11-01-00:00\): ValueError: process\(\) "
                            r"returned no \['totals'\] \(it returned \['total'\]\)"),
    (NoFrame, StageError, r"stage 'sum' failed at epoch 0 .*: TypeError: process\(\) returned \{'totals': 'NoneType'\}"),
    (Uncastable, SinkError, r"sink 'totals' failed at epoch 0 \(partition 2026-11-01-00:00\): \w*Exception: "
                            r"\[CAST_INVALID_INPUT\] The value 'x[12]'"),
    # said as the stage returns (its output's columns are known without a job), not when the sink writes
    (LacksColumn, SinkError, r"sink 'totals' failed at epoch 0 \(partition 2026-11-01-00:00\): ValueError: sink "
                             r"'totals': input lacks column\(s\) \['total'\]; got \['key', 'sum'\]"),
])
def test_a_stage_output_that_is_not_what_it_declares_names_the_stage_or_the_sink(spark, tmp_path, toy_registered,
                                                                                 stage_class, error, message, capfd):
    runner = _runner(spark, tmp_path, stage_class)
    capfd.readouterr()
    with pytest.raises(error) as raised:
        runner.run(to=FIRST)
    first_line = str(raised.value).splitlines()[0]  # what the command line prints
    assert re.search(message, first_line), first_line
    # PySpark's query-context loggers would print the cast's error again, as a JSON line with its Java stack
    # (probe, 2026-12-06: up to 36 KB on stderr before epochal's own line)
    printed = capfd.readouterr().err
    assert not any(name in printed for name in QUERY_CONTEXT_LOGGERS), printed[:2000]
    assert runner.d.progress.load().last_done_epoch is None
    if stage_class is LacksColumn:  # no sink was written, not even the one that reads another stage
        assert not (tmp_path / "warehouse" / "log").exists() and not (tmp_path / "warehouse" / "totals").exists()


def test_a_row_without_a_key_is_refused_by_keyed_state_in_one_line_and_the_state_is_unchanged(spark, tmp_path,
                                                                                              toy_registered):
    runner = _runner(spark, tmp_path)
    runner.run(to=FIRST)
    hour = tmp_path / "landing" / "dt=2026-11-01" / "hour=01"
    hour.mkdir(parents=True)
    (hour / "part-0000.jsonl").write_text(json.dumps({"key": "a", "n": 1}) + "\n" + json.dumps({"n": 5}) + "\n")
    before = sorted(tuple(r) for r in runner.d.keyed["sum"].values(toy.TOTAL).collect())
    with pytest.raises(StageError) as raised:
        runner.run(to="2026-11-01-01:00")
    first_line = str(raised.value).splitlines()[0]
    assert first_line.startswith("stage 'sum' failed at epoch 1 (partition 2026-11-01-01:00): StateSchemaError: "
                                 "writing state sum/total at epoch 1: a row has a null key"), first_line
    assert "drop the rows whose key is null" in first_line
    assert sorted(tuple(r) for r in runner.d.keyed["sum"].values(toy.TOTAL).collect()) == before


class ReadWithFailingUdf(toy.Read):
    """A Python UDF that raises: Spark runs it only when a later stage or sink computes the rows (probe, 2026-12-04)."""

    def process(self, ctx, inputs):
        rows = super().process(ctx, inputs)["rows"]

        @F.udf("long")
        def doubled(n):
            if n == 2:
                raise RuntimeError(f"cannot double {n}")
            return 2 * n

        return {"rows": rows.withColumn("n", doubled("n"))}


def test_a_udfs_error_is_named_in_the_first_line_with_the_stages_spark_may_have_computed_it_in(spark, tmp_path,
                                                                                                 toy_registered):
    runner = _runner(spark, tmp_path)
    runner.d.pipeline.stages[0].__class__ = ReadWithFailingUdf
    with pytest.raises(StageError) as raised:
        runner.run(to=FIRST)
    first_line = str(raised.value).splitlines()[0]
    assert re.match(r"(stage 'sum'|sink 'totals') failed at epoch 0 \(partition 2026-11-01-00:00\): \w*Exception: "
                    r".*RuntimeError: cannot double 2 \((?:while writing state sum/total; at \S+:\d+ in doubled; )?"
                    r"Spark computes lazily: the failing expression may be "
                    r"(this stage's or in a stage it reads: read|in the stages its input is computed in: read, sum)\)$",
                    first_line), first_line


class Raises(toy.Sum):
    def process(self, ctx, inputs):
        totals = super().process(ctx, inputs)["totals"]
        return {"totals": totals.withColumn("share", F.lit(1 / ctx.info.epoch))}  # epoch 0: raises here


def test_an_error_in_the_stages_own_code_names_its_file_and_line_in_the_first_line(spark, tmp_path, toy_registered):
    import inspect

    runner = _runner(spark, tmp_path, Raises)
    with pytest.raises(StageError) as raised:
        runner.run(to=FIRST)
    first_line = str(raised.value).splitlines()[0]
    line = inspect.getsourcelines(Raises.process)[1] + 2
    assert first_line.startswith("stage 'sum' failed at epoch 0 (partition 2026-11-01-00:00): ZeroDivisionError: "
                                 "division by zero (at "), first_line
    assert first_line.endswith(f"test_user_mistakes.py:{line} in process)"), first_line


class SnapshotRaises(toy.Sum):
    def snapshot_state(self, context):
        if context.epoch == 1:
            raise RuntimeError(f"cannot snapshot epoch {context.epoch}")


class InitializeRaises(toy.Sum):
    def initialize_state(self, context):
        raise KeyError("no such list")


@pytest.mark.parametrize(("stage_class", "hook", "epoch", "error"), [
    (SnapshotRaises, "snapshot_state", 1, "RuntimeError: cannot snapshot epoch 1"),
    (InitializeRaises, "initialize_state", 0, "KeyError: 'no such list'"),
])
def test_an_error_in_the_stages_checkpointed_function_hooks_names_the_stage_epoch_file_and_line(
    spark, tmp_path, toy_registered, stage_class, hook, epoch, error
):
    """Found by a probe (2026-12-06): an exception in ``snapshot_state`` failed the run with its bare message."""
    import inspect

    runner = _runner(spark, tmp_path, stage_class)
    with pytest.raises(StageError) as raised:
        runner.run(to="2026-11-01-01:00")
    first_line = str(raised.value).splitlines()[0]
    lines, start = inspect.getsourcelines(getattr(stage_class, hook))
    line = start + next(i for i, text in enumerate(lines) if "raise" in text)
    assert first_line.startswith(f"stage 'sum' failed at epoch {epoch} (partition 2026-11-01-0{epoch}:00): {error} (at ")
    assert first_line.endswith(f"{Path(__file__).name}:{line} in {hook})"), first_line
    assert runner.d.progress.load().in_progress == epoch, "the epoch stays in progress: the next run restores"

class UsesUndeclared(toy.Sum):
    """Reads and writes a keyed state it does not list in ``keyed_state`` (found by a probe, 2026-12-04)."""

    LAST = ValueStateDescriptor("last", value_type=T.LongType())

    def process(self, ctx, inputs):
        out = super().process(ctx, inputs)
        ctx.keyed.update(self.LAST, inputs["read.rows"].groupBy("key").agg(F.max("n").alias("value")))
        return out


def test_a_keyed_state_the_stage_does_not_declare_is_refused_naming_it_before_a_table_exists(spark, tmp_path,
                                                                                             toy_registered):
    """Undeclared state is in no checkpoint: restores would not rewind it. It used to be written all the same."""
    runner = _runner(spark, tmp_path, UsesUndeclared)
    with pytest.raises(StageError) as raised:
        runner.run(to=FIRST)
    first_line = str(raised.value).splitlines()[0]
    assert first_line.startswith("stage 'sum' failed at epoch 0 (partition 2026-11-01-00:00): StateSchemaError: "
                                 "stage 'sum' uses keyed state 'last', which it does not declare (declared: ['total'])"), first_line
    assert "add its descriptor to the stage's keyed_state" in first_line
    assert not (tmp_path / "checkpoints" / "shared" / "sum" / "last").exists()
    assert runner.d.progress.load().last_done_epoch is None


def test_a_backfill_of_one_partition_says_that_the_partitions_after_it_were_rewound(spark, tmp_path, toy_registered,
                                                                                   capsys):
    from epochal.orchestration.cli import main

    for hour in range(3):
        toy.write_hour(tmp_path / "landing", hour, [("a", hour + 1)])
    config = str(_config(tmp_path, tmp_path / "landing"))
    assert main(["run", "--to", "2026-11-01-02:00", "--config", config, "--json"]) == 0
    capsys.readouterr()
    assert main(["run", "--partition", "2026-11-01-01:00", "--config", config, "--json"]) == 0
    assert ("backfill done: state and sinks are at 2026-11-01-01:00; the partitions after it, up to 2026-11-01-02:00, "
            "were rewound") in capsys.readouterr().err
    assert main(["run", "--to", "2026-11-01-02:00", "--config", config, "--json"]) == 0
    assert [e["partition"] for e in json.loads(capsys.readouterr().out)["epochs"]] == ["2026-11-01-02:00"]


def test_an_hour_folder_whose_files_the_source_would_not_read_fails_its_plan_and_pattern_reads_them(tmp_path):
    """``part-0.json`` (or ``.csv``) in an hour folder of a source reading ``*.jsonl`` made an empty epoch, done for
    good: those files were never read. Now the plan fails naming them; ``pattern=`` reads them; a file that does not
    match beside files that do is named in a warning; ``_SUCCESS`` and dot files are never data."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    hours = Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY)
    landing = tmp_path / "landing"
    for hour, names in ((0, ["part-0.json", "_SUCCESS"]), (1, ["part-0.jsonl", "notes.txt", ".part-1.jsonl.crc"])):
        folder = landing / "dt=2026-11-01" / f"hour={hour:02d}"
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text('{"key": "a", "n": 1}\n')
    source = HourlyFolderSource("landing", str(landing))
    with pytest.raises(UnreadFilesError, match=re.escape(
            "source 'landing', partition 2026-11-01-00:00: 1 file(s) that do not match '*.jsonl' and none that do, "
            f"e.g. {landing}/dt=2026-11-01/hour=00/part-0.json")):
        source.plan(hours.info(0))
    assert [Path(f).name for f in HourlyFolderSource("landing", str(landing), pattern="*.json").plan(hours.info(0)).files] == ["part-0.json"]
    assert [Path(f).name for f in source.plan(hours.info(1)).files] == ["part-0.jsonl"]  # notes.txt: a warning
    assert [Path(f).name for f in HourlyFolderSource("landing", str(landing), pattern="*").plan(hours.info(1)).files] == [
        "notes.txt", "part-0.jsonl"]
    assert source.plan(hours.info(2)).files == ()  # an hour without a folder: an empty epoch


def test_state_read_limit_below_one_is_refused_by_the_command_line(capsys):
    """``--limit -1`` reached Spark's optimizer ("Optimizer rule 'eliminate_limit' failed")."""
    from epochal.orchestration.cli import build_parser

    for bad in ("-1", "0"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["state", "read", "dedupe", "seen", "--limit", bad])
        assert f"argument --limit: must be >= 1, not {bad}" in capsys.readouterr().err
    assert build_parser().parse_args(["state", "read", "dedupe", "seen", "--limit", "3"]).limit == 3


def _landing_with(tmp_path: Path, files: dict[str, str]) -> Path:
    """A landing folder holding ``files`` (path under it: content)."""
    landing = tmp_path / "landing"
    for relative, content in files.items():
        (landing / relative).parent.mkdir(parents=True, exist_ok=True)
        (landing / relative).write_text(content)
    return landing


@pytest.mark.parametrize("name", ["part[1].jsonl", "part{a,b}.jsonl", "part*.jsonl", "part?.jsonl", "part\\1.jsonl",
                                  "events-2026-11-01T00:00:00.jsonl"])
def test_a_file_name_spark_would_read_as_a_pattern_or_a_uri_fails_its_plan_naming_it(tmp_path, name):
    """Spark reads a path as a Hadoop glob: ``part[1].jsonl`` beside ``part1.jsonl`` ran "completed" with the first
    never read and the second read twice; ``part[1].jsonl`` or ``part{a,b}.jsonl`` alone failed with PATH_NOT_FOUND; a
    name with a ':' failed deep in Spark ("Relative path in absolute URI"). Now the plan refuses such a name, naming
    the file; the hour folder's other files are not planned either (nothing is read or committed)."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    hours = Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY)
    landing = _landing_with(tmp_path, {f"dt=2026-11-01/hour=00/{n}": '{"key": "a", "n": 1}\n'
                                       for n in (name, "part1.jsonl")})
    source = HourlyFolderSource("landing", str(landing))
    with pytest.raises(UnreadFilesError, match=re.escape(
            "source 'landing', partition 2026-11-01-00:00: 1 file(s) whose name holds a glob character (*?[]{}\\) or "
            f"a ':', which Spark would not read as named: {landing}/dt=2026-11-01/hour=00/{name}. Operator action: "
            "rename them: Spark reads a path as a glob pattern (and a ':' as a URI scheme)")) as raised:
        source.plan(hours.info(0))
    assert raised.value.context["files"] == [f"{landing}/dt=2026-11-01/hour=00/{name}"]
    (landing / "dt=2026-11-01/hour=00" / name).rename(landing / "dt=2026-11-01/hour=00/part2.jsonl")
    assert [Path(f).name for f in source.plan(hours.info(0)).files] == ["part1.jsonl", "part2.jsonl"]


def test_a_file_name_that_is_not_utf8_fails_its_plan_naming_it(tmp_path):
    """``part-\\xe9.jsonl`` (a Latin-1 name) failed the epoch with py4j's "An error occurred while calling o166.add"."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    hours = Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY)
    landing = _landing_with(tmp_path, {"dt=2026-11-01/hour=00/part-0000.jsonl": '{"key": "a", "n": 1}\n'})
    with open(os.fsencode(landing / "dt=2026-11-01/hour=00") + b"/part-\xe9.jsonl", "w") as latin1:
        latin1.write('{"key": "b", "n": 1}\n')
    with pytest.raises(UnreadFilesError, match=re.escape(
            "1 file(s) whose name is not valid UTF-8 (shown with U+FFFD for each bad byte), which Spark cannot be "
            f"given: {landing}/dt=2026-11-01/hour=00/part-\ufffd.jsonl. Operator action: rename them")):
        HourlyFolderSource("landing", str(landing)).plan(hours.info(0))


def test_a_file_directly_in_a_day_folder_fails_the_plan_of_every_partition_of_that_day_naming_it(tmp_path):
    """``landing/dt=2026-11-10/part-0000.jsonl`` (no hour folder) made a daily partition's epoch succeed with 0 rows and
    no warning, done for good: the file was never read. Now the plan of the daily partition, and of each hourly
    partition of that day, fails naming it; another day's partitions, and dot or underscore files there, are not
    concerned; the hour folders' files are listed once nothing is wrong."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    line = '{"key": "a", "n": 1}\n'
    landing = _landing_with(tmp_path, {"dt=2026-11-10/part-0000.jsonl": line, "dt=2026-11-10/hour=03/part-0001.jsonl": line,
                                       "dt=2026-11-10/_SUCCESS": "", "dt=2026-11-10/.part-0000.jsonl.crc": "",
                                       "dt=2026-11-11/hour=00/part-0000.jsonl": line})
    loose = f"{landing}/dt=2026-11-10/part-0000.jsonl"
    days = Partitioning(datetime(2026, 11, 10, tzinfo=timezone.utc), Granularity.DAILY)
    hours = Partitioning(datetime(2026, 11, 10, tzinfo=timezone.utc), Granularity.HOURLY)
    source = HourlyFolderSource("landing", str(landing))
    for info in (days.info(0), hours.info(3), hours.info(23)):
        with pytest.raises(UnreadFilesError, match=re.escape(
                f"source 'landing', partition {info.partition}: 1 file(s) directly in the day folder, in no hour "
                f"folder, which no partition reads: {loose}. Operator action: move them into the day folder's hour "
                "folder hour=HH of the UTC hour they belong to")) as raised:
            source.plan(info)
        assert raised.value.context["files"] == [loose]
    assert [Path(f).name for f in source.plan(days.info(1)).files] == ["part-0000.jsonl"]  # the next day: unconcerned
    assert [Path(f).name for f in source.plan(hours.info(24)).files] == ["part-0000.jsonl"]
    (landing / "dt=2026-11-10/part-0000.jsonl").rename(landing / "dt=2026-11-10/hour=03/part-0000.jsonl")
    assert [Path(f).relative_to(landing).as_posix() for f in source.plan(days.info(0)).files] == [
        "dt=2026-11-10/hour=03/part-0000.jsonl", "dt=2026-11-10/hour=03/part-0001.jsonl"]
    assert [Path(f).name for f in source.plan(hours.info(3)).files] == ["part-0000.jsonl", "part-0001.jsonl"]
    assert source.plan(hours.info(4)).files == ()


@pytest.mark.parametrize(("folder", "why"), [
    ("hour=4", "hour=4 is not an hour folder: name it hour=04"),
    ("hour=24", "hour=24 is not an hour folder: hours run from hour=00 to hour=23 (UTC)"),
    ("hour=4x", "hour=4x is not an hour folder: move its files into the hour=HH folder (00 to 23) of their UTC hour"),
    ("tmp", "tmp is not an hour folder: move its files into the hour=HH folder (00 to 23) of their UTC hour")])
def test_a_folder_of_a_day_folder_not_named_hour_hh_holding_files_fails_the_plan_naming_it(tmp_path, folder, why):
    """Found from outside: ``dt=2026-11-10/hour=4/part-0000.jsonl`` (or ``hour=24``, ``hour=4x``, ``tmp``) was never
    read and the epoch completed empty. Now the plan of every partition of that day fails naming the folder and what
    is wrong; an empty such folder, or one holding only dot or underscore files, and ``_tmp`` folders are not
    concerned."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    line = '{"key": "a", "n": 1}\n'
    landing = _landing_with(tmp_path, {f"dt=2026-11-10/{folder}/part-0000.jsonl": line,
                                       "dt=2026-11-10/_tmp/x.jsonl": line, "dt=2026-11-10/other/_SUCCESS": "",
                                       "dt=2026-11-10/hour=03/part-0001.jsonl": line})
    (landing / "dt=2026-11-10/empty").mkdir()
    days = Partitioning(datetime(2026, 11, 10, tzinfo=timezone.utc), Granularity.DAILY)
    hours = Partitioning(datetime(2026, 11, 10, tzinfo=timezone.utc), Granularity.HOURLY)
    source = HourlyFolderSource("landing", str(landing))
    for info in (days.info(0), hours.info(3), hours.info(4)):
        with pytest.raises(UnreadFilesError, match=re.escape(
                f"source 'landing', partition {info.partition}: 1 folder(s) holding files in the day folder, not hour "
                f"folders, whose files no partition reads: {landing}/dt=2026-11-10/{folder} ({why})")) as raised:
            source.plan(info)
        assert raised.value.context["files"] == [f"{landing}/dt=2026-11-10/{folder}"]
    (landing / f"dt=2026-11-10/{folder}/part-0000.jsonl").rename(landing / "dt=2026-11-10/hour=03/part-0000.jsonl")
    assert [Path(f).name for f in source.plan(days.info(0)).files] == ["part-0000.jsonl", "part-0001.jsonl"]


def test_a_folder_in_an_hour_folder_whose_name_matches_the_pattern_fails_the_plan_naming_it(tmp_path):
    """Found from outside: a folder ``hour=00/batch.jsonl/`` was planned as a file to read. Now the plan fails naming
    it; a folder whose name does not match stays a file not read (a warning), as before."""
    from datetime import datetime, timezone

    from epochal import HourlyFolderSource
    from epochal.config import Granularity
    from epochal.pipeline.errors import UnreadFilesError
    from epochal.pipeline.partitions import Partitioning

    hours = Partitioning(datetime(2026, 11, 1, tzinfo=timezone.utc), Granularity.HOURLY)
    landing = _landing_with(tmp_path, {"dt=2026-11-01/hour=00/batch.jsonl/part-0.jsonl": '{"key": "a"}\n',
                                       "dt=2026-11-01/hour=00/part-1.jsonl": '{"key": "b"}\n'})
    source = HourlyFolderSource("landing", str(landing))
    with pytest.raises(UnreadFilesError, match=re.escape(
            "source 'landing', partition 2026-11-01-00:00: 1 folder(s) in an hour folder whose name matches '*.jsonl', "
            f"which would be read as files: {landing}/dt=2026-11-01/hour=00/batch.jsonl")):
        source.plan(hours.info(0))
    (landing / "dt=2026-11-01/hour=00/batch.jsonl").rename(landing / "dt=2026-11-01/hour=00/batch")
    assert [Path(f).name for f in source.plan(hours.info(0)).files] == ["part-1.jsonl"]


class CastsBadly(toy.Sum):
    def process(self, ctx, inputs):
        batch = inputs["read.rows"].groupBy("key").agg(F.sum("n").alias("n"))
        ctx.keyed.update(toy.TOTAL, batch.select("key", F.lit("not a number").alias("value")))  # a long state
        return {"totals": batch.select("key", F.col("n").alias("total"))}


def test_a_failed_state_write_names_the_state_and_the_line(spark, tmp_path, toy_registered):
    """Found from outside (probe 16): a value that does not cast to the state's type (or a reduce that raises)
    failed the stage naming neither the state being written nor the user's line, only the upstream stages."""
    runner = _runner(spark, tmp_path, CastsBadly)
    with pytest.raises(StageError) as raised:
        runner.run(to=FIRST)
    first_line = str(raised.value).splitlines()[0]
    assert first_line.startswith("stage 'sum' failed at epoch 0 (partition 2026-11-01-00:00): "), first_line
    assert "CAST_INVALID_INPUT" in first_line or "NumberFormatException" in first_line, first_line
    assert re.search(r"\(while writing state sum/total; at \S*test_user_mistakes\.py:\d+ in process; Spark computes lazily",
                     first_line), first_line


def test_state_read_of_a_table_whose_files_are_gone_names_the_state_in_one_line(spark, tmp_path, toy_registered, capsys):
    """Probe 18: ``state read --checkpoint N`` with a data file deleted printed delta-rs's raw "Object Store error"."""
    from epochal.orchestration.cli import main

    toy.write_hour(tmp_path / "landing", 0, [("a", 1)])
    config = str(_config(tmp_path, tmp_path / "landing"))
    assert main(["run", "--to", FIRST, "--config", config, "--json"]) == 0
    for data in (tmp_path / "checkpoints" / "shared" / "sum" / "total").glob("*.parquet"):
        data.unlink()
    capsys.readouterr()
    assert main(["state", "read", "sum", "total", "--checkpoint", "1", "--config", config]) == 1
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("epochal: error:")]
    assert line.startswith(f"epochal: error: state sum/total: its table {tmp_path / 'checkpoints' / 'shared' / 'sum' / 'total'}"), line
    assert " cannot be read: " in line and "read another checkpoint" in line, line
