"""The log replay this process remembers (``epochal.state.delta.remembered.REPLAYS``): each commit file read once.

Tables are written by delta-rs (no JVM). Every snapshot taken through the remembered replay must equal a
replay from nothing (the cache cleared), and the reads it saves are counted: a later version reads only
the commits after the remembered one, older versions read none. A table deleted and written again at the
same path is read afresh.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from epochal.state.delta import log as delta_log
from epochal.state.delta.log import DeltaLog
from epochal.state.delta.remembered import REPLAYS


def write(path: Path, rows: range, mode: str = "append") -> None:
    from deltalake import write_deltalake

    write_deltalake(f"file://{path}", pa.table({"k": pa.array(list(rows), pa.int64())}), mode=mode)


def fresh(path: Path, versions: list[int]) -> dict:
    REPLAYS.clear()
    try:
        return DeltaLog(f"file://{path}").snapshots(versions)
    finally:
        REPLAYS.clear()


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Log files read, by name."""
    counted: Counter = Counter()
    real = DeltaLog._text

    def text(self, name, version):
        counted[name] += 1
        return real(self, name, version)

    monkeypatch.setattr(DeltaLog, "_text", text)
    REPLAYS.clear()
    yield counted
    REPLAYS.clear()


def commit(version: int) -> str:
    return f"{version:020d}.json"


def test_a_later_version_reads_only_the_commits_after_the_remembered_one(tmp_path, reads) -> None:
    path = tmp_path / "t"
    for i in range(6):
        write(path, range(i * 10, i * 10 + 3), mode="overwrite" if i % 2 else "append")
    log = DeltaLog(f"file://{path}")
    first = log.snapshot(5)
    assert sorted(reads) == [commit(v) for v in range(6)], "the first replay reads every commit"

    write(path, range(100, 103))  # version 6
    write(path, range(200, 203), mode="overwrite")  # version 7
    reads.clear()
    later = DeltaLog(f"file://{path}").snapshots([6, 7])
    assert reads == Counter({commit(5): 1, commit(6): 1, commit(7): 1}), "the check of version 5, then 6 and 7 only"
    assert later == fresh(path, [6, 7])
    assert first == fresh(path, [5])[5]


def test_older_versions_replay_from_the_commits_already_read(tmp_path, reads) -> None:
    path = tmp_path / "t"
    for i in range(5):
        write(path, range(i, i + 2), mode="overwrite" if i == 3 else "append")
    DeltaLog(f"file://{path}").snapshot(4)
    reads.clear()
    older = DeltaLog(f"file://{path}").snapshots([1, 2, 4])
    assert reads == Counter({commit(4): 1}), "only the check that the table is the one remembered"
    assert older == fresh(path, [1, 2, 4])
    assert older[1].rows == 4 and older[4].rows == 4, "each version's own files, not the remembered replay's"


def test_a_table_written_again_at_the_same_path_is_read_afresh(tmp_path, reads) -> None:
    path = tmp_path / "t"
    for i in range(3):
        write(path, range(i, i + 1))
    assert DeltaLog(f"file://{path}").snapshot(2).rows == 3
    shutil.rmtree(path)
    for i in range(4):
        write(path, range(50, 50 + 5 * (i + 1)), mode="overwrite" if i else "append")
    reads.clear()
    again = DeltaLog(f"file://{path}").snapshots([2, 3])
    assert again[2].rows == 15 and again[3].rows == 20
    assert reads[commit(0)] == 1, "the new table's log was replayed from its first commit"
    assert again == fresh(path, [2, 3])


def test_a_commit_gone_from_the_log_is_still_missing_with_a_remembered_replay(tmp_path, reads) -> None:
    path = tmp_path / "t"
    for i in range(4):
        write(path, range(i, i + 1))
    DeltaLog(f"file://{path}").snapshot(1)
    (path / "_delta_log" / commit(2)).unlink()
    with pytest.raises(delta_log.SnapshotUnavailable, match="no longer covers version 3"):
        DeltaLog(f"file://{path}").snapshot(3)
