"""Corrupt checkpoints, savepoints and run files: fall back with a warning naming the bad one, or fail clearly.

One toy deployment: checkpoint 1 (epoch 0), savepoint ``sp`` (2, epoch 0),
checkpoints 3 (epoch 1) and 4 (epoch 2); retain 2. Each case corrupts some
files, checks what restore (or a run after a crash) does, and repairs them.
A failed attempt must change nothing (table versions, the run position). At
the end the run completes and the sinks equal a straight run. The outcomes are a
figure for docs/reliability.md (make reliability-doc).
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

import tests.support.toy_pipeline as toy
from epochal.config import load_settings
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.progress import Progress
from epochal.pipeline.registry import build_deployment
from epochal.pipeline.runner import EpochRunner
from tests.support.reliability_checks import deployment_tables, local
from tests.support.reliability_doc import markdown_table, write_section
from epochal.state.errors import CheckpointError, InvalidSavepointName
from epochal.state.checkpoint.metadata import content_checksum
from epochal.state.errors import EpochalStateError
from epochal.state.delta.log import DeltaLog
from epochal.state.errors import CheckpointNotRestorable, NoRestorableCheckpoint, RestoreFallbackWarning
from epochal.state.delta.paths import resolve_table_url

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

LAST = "2026-11-01-03:00"
HOURS = [[("a", 1), ("b", 2)], [("a", 10), ("c", 3)], [("b", 5)], [("a", 100), ("d", 7)]]
EXPECTED_TOTALS = {"a": 111, "b": 7, "c": 3, "d": 7}
EXPECTED_LOG = sorted((e, k, n) for e, rows in enumerate(HOURS) for k, n in rows)


class Corruptor:
    """Damages files and puts the original bytes back."""

    def __init__(self, tmp: Path) -> None:
        self.attic = tmp / "attic"
        self.attic.mkdir()
        self.saved: list[tuple[Path, Path]] = []

    def _save(self, path: Path) -> None:
        keep = self.attic / str(len(self.saved))
        shutil.move(str(path), str(keep))
        self.saved.append((path, keep))

    def truncate(self, path: Path) -> None:
        data = path.read_bytes()
        self._save(path)
        path.write_bytes(data[: len(data) // 2])

    def garbage(self, path: Path) -> None:
        self._save(path)
        path.write_bytes(b"\x00\xffnot a checkpoint\n")

    def remove(self, path: Path) -> None:
        self._save(path)

    def repair(self) -> None:
        for path, keep in reversed(self.saved):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
            shutil.move(str(keep), str(path))
        self.saved.clear()


def _fingerprint(runner) -> dict[str, object]:
    """What a failed restore must leave alone: every table's latest version and the run position."""
    prints: dict[str, object] = {n: DeltaLog(u if "://" in u else f"file://{u}").latest_version()
                                 for n, u in deployment_tables(runner).items()}
    prints["progress"] = runner.d.storage.read(runner.d.storage.child("progress.json"))
    return prints


def _sinks(runner) -> tuple[dict, list]:
    totals = {r.key: r.total for r in runner.d.sinks["totals"].read().collect()}
    log = sorted((r.epoch, r.key, r.n) for r in runner.d.sinks["log"].read().collect())
    return totals, log


def _latest_id(runner) -> int:
    return max(int(c.checkpoint_id) for c in runner.d.coordinator.store.all() if not c.is_savepoint)


def _only_in(runner, newer: int, older: int, stage="sum", state="total") -> Path:
    """A data file of ``stage/state`` in checkpoint ``newer``'s version that ``older``'s does not hold."""
    store = runner.d.coordinator.store
    new, old = store.get(newer), store.get(older)
    handle_new, handle_old = new.metadata.handle(stage, state), old.metadata.handle(stage, state)
    table = DeltaLog(resolve_table_url(handle_new, new.metadata_path))
    files = table.snapshot(handle_new.version).physical_files - table.snapshot(handle_old.version).physical_files
    return local(table.url) / sorted(f for f in files if f.endswith(".parquet"))[0]


@contextmanager
def _unchanged(runner):
    before = _fingerprint(runner)
    yield
    assert _fingerprint(runner) == before, "a failed restore changed something"


def _fails(runner, call: Callable[[], object], error: type[Exception], *patterns: str) -> str:
    with _unchanged(runner), warnings.catch_warnings():
        warnings.simplefilter("ignore", RestoreFallbackWarning)
        with pytest.raises(error) as caught:
            call()
    text = str(caught.value)
    for pattern in patterns:
        assert pattern in text, f"{pattern!r} not in {text!r}"
    return f"error `{type(caught.value).__name__}`: {_short(text)}"


def _falls_back(runner, expected_id: int, *named: str) -> str:
    """The last run died in epoch 3: the next run restores the newest usable checkpoint and replays."""
    runner.d.progress.save(Progress(last_done_epoch=2, in_progress=3))
    with pytest.warns(RestoreFallbackWarning) as caught:
        report = runner.run(to=LAST)
    restored = report.restored
    assert restored.checkpoint_id == expected_id, restored
    messages = " | ".join(str(w.message) for w in caught)
    for name in named:
        assert name in messages, f"{name!r} not named in {messages!r}"
    skipped = [s["checkpoint_id"] for s in restored.skipped]
    retained = {int(c.checkpoint_id) for c in runner.d.coordinator.store.all()}
    assert not retained & set(skipped), "checkpoints newer than the restored one are removed"
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    replayed = [e.epoch for e in report.epochs]
    return (f"`run` fell back to {restored.kind} {expected_id} (epoch {restored.epoch}) with a warning naming "
            f"{skipped}, removed them, replayed epochs {replayed}: sinks equal a straight run")


def _short(text: str, limit: int = 170) -> str:
    text = text.replace("|", "/").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def test_corrupt_checkpoints_fall_back_or_fail_clearly_never_start_empty(spark, tmp_path, toy_registered):
    landing = tmp_path / "landing"
    for hour, rows in enumerate(HOURS):
        toy.write_hour(landing, hour, rows)
    config = {
        "pipeline": "toy", "landing": str(landing), "warehouse": str(tmp_path / "warehouse"),
        "checkpoints": {"dir": str(tmp_path / "checkpoints"), "retain": 2, "interval_epochs": 1},
        "partitions": {"start": "2026-11-01T00:00:00Z"},
        "spark": {"master": "local[2]", "parallelism": 2, "max_parallelism": 16},
    }
    (tmp_path / "epochal.yaml").write_text(yaml.safe_dump(config))
    runner = EpochRunner(build_deployment(load_settings(tmp_path / "epochal.yaml"), spark))
    runner.run(to="2026-11-01-00:00")
    savepoint = runner.savepoint("sp")
    runner.run(to="2026-11-01-02:00")
    storage, fix = runner.d.storage, Corruptor(tmp_path)
    assert [int(c.checkpoint_id) for c in runner.d.coordinator.store.all()] == [2, 3, 4]
    chk = lambda i: local(storage.checkpoint_dir(i))  # noqa: E731
    sp = local(savepoint["path"])
    outcomes: list[list[str]] = []

    def case(name: str, outcome: str) -> None:
        outcomes.append([name, outcome])
        fix.repair()

    # explicit pointers never fall back; every failed attempt changes nothing
    fix.truncate(chk(4) / "_metadata")
    case("restore of a given id (4) whose `_metadata` is truncated",
         _fails(runner, lambda: runner.restore(4), CheckpointNotRestorable, "chk-4/_metadata", "corrupt"))
    missing = _only_in(runner, 4, 3)
    fix.remove(missing)
    case("missing state file (a data file of checkpoint 4's Delta version), restore of id 4",
         _fails(runner, lambda: runner.restore(4), CheckpointNotRestorable, missing.name, "missing"))
    fix.remove(next((sp / "state" / "sum" / "total").glob("*.parquet")))
    case("missing savepoint file (a data file of its state copy)",
         _fails(runner, lambda: runner.restore(savepoint["path"]), CheckpointNotRestorable, "sp", "missing"))
    fix.remove(sp / "_metadata")
    case("missing savepoint `_metadata`",
         _fails(runner, lambda: runner.restore("sp"), CheckpointNotRestorable, "'sp'", "_metadata"))
    fix.garbage(sp / "_metadata")
    case("garbage savepoint `_metadata`",
         _fails(runner, lambda: runner.restore(savepoint["path"]), CheckpointNotRestorable, "sp/_metadata"))
    document = json.loads((sp / "_metadata").read_bytes())
    for handle in document["handles"]:
        handle["table_path"] = "../../shared/" + handle["table_path"].removeprefix("state/")
    document["checksum"] = content_checksum(document)
    fix.garbage(sp / "_metadata")
    (sp / "_metadata").write_text(json.dumps(document))
    case("savepoint whose state paths climb out of its folder (valid checksum)",
         _fails(runner, lambda: runner.restore("sp"), CheckpointNotRestorable, "escapes"))

    # the last run died and nothing retained is usable: the next run fails and changes nothing
    fix.garbage(chk(4) / "_metadata")
    fix.remove(chk(3))
    fix.remove(sp / "_metadata")
    runner.d.progress.save(Progress(last_done_epoch=2, in_progress=3))
    outcome = _fails(runner, lambda: runner.run(to=LAST), NoRestorableCheckpoint,
                     "None of the 3 retained checkpoints", "NOT reset to empty")
    assert runner.d.progress.load().in_progress == 3, "the next run still knows the last one died"
    case("`run` after a crash when no retained checkpoint or savepoint is usable", outcome)
    case("savepoint named `../x` after a crash (a restore would come first)",
         _fails(runner, lambda: runner.savepoint("../x"), InvalidSavepointName, "'../x'"))
    progress = storage.child("progress.json")
    fix.garbage(local(progress))
    local(progress).write_text('{"last_done_epoch": "two"')
    case("garbage run position file (`progress.json`)",
         _fails(runner, lambda: runner.run(to=LAST), PipelineError, "progress.json", "corrupt"))

    # the latest is unusable: fall back (the run after a crash), the broken ones are removed
    fix.truncate(chk(4) / "_metadata")
    fix.saved.clear()
    case("truncated `_metadata` of the latest checkpoint (4)", _falls_back(runner, 3, "chk-4/_metadata", "corrupt"))
    latest = _latest_id(runner)
    fix.garbage(chk(latest) / "_metadata")
    fix.saved.clear()
    case(f"garbage `_metadata` of the latest checkpoint ({latest})", _falls_back(runner, latest - 1, f"chk-{latest}/_metadata"))
    latest = _latest_id(runner)
    shutil.rmtree(chk(latest))
    case(f"completed-checkpoint row pointing nowhere (`chk-{latest}/` deleted)",
         _falls_back(runner, latest - 2, f"chk-{latest}/_metadata"))
    latest = _latest_id(runner)
    previous = int(runner.d.coordinator.store.all()[-2].checkpoint_id)
    missing = _only_in(runner, latest, previous)
    missing.unlink()
    case(f"missing state file (a data file of checkpoint {latest}'s Delta version)",
         _falls_back(runner, previous, f"checkpoint {latest}", missing.name))

    # a backfill restores the newest checkpoint before its start: a broken one is skipped the same way
    newest_before = max((c for c in runner.d.coordinator.store.all() if int(c.metadata.epoch) < 3 and not c.is_savepoint),
                        key=lambda c: int(c.checkpoint_id))
    fix.garbage(chk(int(newest_before.checkpoint_id)) / "_metadata")
    fix.saved.clear()
    with pytest.warns(RestoreFallbackWarning, match=f"checkpoint {int(newest_before.checkpoint_id)}"):
        report = runner.run(from_=LAST, to=LAST)
    replayed = [e.epoch for e in report.epochs]
    assert (report.restored.checkpoint_id, replayed) == (2, [1, 2, 3])
    assert _sinks(runner) == (EXPECTED_TOTALS, EXPECTED_LOG)
    case(f"backfill `run --from` epoch 3 when the newest checkpoint before it ({int(newest_before.checkpoint_id)}) is corrupt",
         f"fell back to savepoint 2 (epoch 0) with a warning, replayed epochs {replayed}: sinks equal a straight run")

    body = (
        "A toy deployment (4 hourly partitions, a checkpoint every epoch, retain 2) with checkpoints 3 (epoch 1) "
        "and 4 (epoch 2) and savepoint `sp` (epoch 0, id 2). Each row damages files and tries a restore (a given "
        "id or savepoint, or `run` after a crash, which restores the newest usable checkpoint). Error rows check "
        "that the attempt changed nothing (every state and sink table's version, the run position), then repair "
        "the files; fallback rows run on and compare the sinks with a straight run.\n\n" + markdown_table(["case", "outcome"], outcomes)
    )
    print("\n" + body)
    write_section("corruption", "Corruption", body, test=__file__)
    assert issubclass(CheckpointNotRestorable, CheckpointError) and issubclass(CheckpointError, EpochalStateError)
