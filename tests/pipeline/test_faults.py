"""Crash injection: named points (with an epoch and a hit count) and a timer, each a real SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys, time
from epochal.pipeline.faults import arm_crash_timer, crashpoint
for epoch in (0, 1):
    for stage in ("read", "sum"):
        crashpoint("in_stage", epoch)
        print(f"{epoch}:{stage}", flush=True)
if sys.argv[1] == "timer":
    arm_crash_timer()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
"""


def _run(mode: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_CRASH")}
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], env={**clean, **env}, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("crash_at", "printed"), [
    ("in_stage", []),
    ("in_stage:1", ["0:read", "0:sum"]),
    ("in_stage:1@2", ["0:read", "0:sum", "1:read"]),
    ("in_stage@3", ["0:read", "0:sum"]),
    ("after_plan", ["0:read", "0:sum", "1:read", "1:sum"]),
])
def test_named_points_kill_at_the_requested_hit(crash_at, printed) -> None:
    result = _run("points", EPOCHAL_CRASH_AT=crash_at)
    assert result.stdout.split() == printed
    assert result.returncode == (0 if len(printed) == 4 else -9)


def test_the_timer_kills_after_its_delay() -> None:
    result = _run("timer", EPOCHAL_CRASH_AFTER_S="0.5")
    assert result.returncode == -9, "the loop runs 60 s unless the timer kills it"


def test_a_pause_point_stops_the_process_there_until_it_is_continued(tmp_path) -> None:
    import signal
    import time

    clean = {k: v for k, v in os.environ.items() if not k.startswith("EPOCHAL_")}
    with open(tmp_path / "out", "w") as out:
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, "points"], env={**clean, "EPOCHAL_PAUSE_AT": "in_stage:1@2"},
                                 stdout=out)
    try:
        deadline = time.monotonic() + 120
        while Path(f"/proc/{child.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"T":
            assert child.poll() is None and time.monotonic() < deadline, "the child never stopped"
            time.sleep(0.05)
        assert (tmp_path / "out").read_text().split() == ["0:read", "0:sum", "1:read"]
    finally:
        os.kill(child.pid, signal.SIGCONT)
    assert child.wait(timeout=60) == 0, "continued, it runs to the end: a pause point stops only once"
    assert (tmp_path / "out").read_text().split() == ["0:read", "0:sum", "1:read", "1:sum"]
