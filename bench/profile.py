"""Where an epoch's time goes: Spark jobs per call site (event log) and Python frames (py-spy).

``python -m bench.profile EVENT_LOG [--pyspy COLLAPSED] [--top 25]`` prints, from
a Spark event log (a plain file as bench runs write it, or the rolling folder Spark 4 writes by default), every job's duration grouped by the Python line that
started it (``callSite.short``: the epoch step's label for epochal's jobs), the SQL executions grouped by description,
and the time the driver spent between jobs; with ``--pyspy``, the Python
functions (inclusive wall time, ``py-spy record --idle --format raw``) whose
names come from this repository.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


@dataclass(frozen=True)
class Job:
    job_id: int
    call_site: str
    start_ms: int
    end_ms: int
    stages: int

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000


def event_files(path: Path) -> list[Path]:
    """The files of an event log: ``path`` itself, or, for the folder a rolling log is (Spark 4's default,
    ``eventlog_v2_<app>/events_<n>_<app>[.zstd]``), its ``events_*`` files in order."""
    if not path.is_dir():
        return [path]
    number = re.compile(r"events_(\d+)_")
    files = [f for f in path.iterdir() if number.match(f.name)]
    if not files:
        raise SystemExit(f"{path}: no events_<n>_<app> files in this folder (not a Spark event log?)")
    return sorted(files, key=lambda f: int(number.match(f.name).group(1)))


def _lines(path: Path) -> Iterable[str]:
    """The JSON lines of one event-log file; a zstd-compressed one (Spark 4's default codec) streamed through
    ``zstd -dc``."""
    codec = path.suffix.lstrip(".")
    if codec in ("", "inprogress"):
        with path.open() as fh:
            yield from fh
        return
    if codec != "zstd":
        raise SystemExit(f"{path}: compressed with {codec}; write the log plain: spark.eventLog.compress=false (bench runs do)")
    if shutil.which("zstd") is None:
        raise SystemExit(f"{path}: compressed with zstd and no zstd command here; install zstd, or write the log plain")
    with subprocess.Popen(["zstd", "-dc", str(path)], stdout=subprocess.PIPE, text=True) as unzstd:
        yield from unzstd.stdout
    if unzstd.returncode:
        raise SystemExit(f"{path}: zstd -dc failed ({unzstd.returncode})")


def _events(path: Path) -> Iterable[dict[str, Any]]:
    for file in event_files(path):
        for line in _lines(file):
            if line.strip():
                yield json.loads(line)


def read_jobs(path: Path) -> list[Job]:
    """Every completed job of an event log (a file, or a rolling log's folder)."""
    starts: dict[int, dict[str, Any]] = {}
    jobs = []
    for event in _events(path):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            starts[event["Job ID"]] = event
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in starts:
            start = starts.pop(event["Job ID"])
            props = start.get("Properties") or {}
            site = props.get("callSite.short") or props.get("spark.job.description") or "?"
            jobs.append(Job(event["Job ID"], site, start["Submission Time"], event["Completion Time"], len(start.get("Stage IDs", []))))
    return jobs


def summarize_jobs(jobs: list[Job]) -> list[dict[str, Any]]:
    """Per call site: jobs, seconds; sorted by seconds."""
    by_site: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_site[job.call_site].append(job)
    rows = [{"call_site": s, "jobs": len(js), "seconds": round(sum(j.seconds for j in js), 2)} for s, js in by_site.items()]
    return sorted(rows, key=lambda r: -r["seconds"])


def busy_seconds(jobs: list[Job]) -> float:
    """Wall time covered by at least one running job (jobs may overlap)."""
    spans = sorted((j.start_ms, j.end_ms) for j in jobs)
    total, end = 0, None
    for s, e in spans:
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total / 1000


_OURS = re.compile(r"\((bench|pipeline|state|config|orchestration)/")


def pyspy_inclusive(path: Path) -> list[tuple[str, float]]:
    """Inclusive share of samples per function of this repository, from py-spy's raw (collapsed) output."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        total += int(n)
        seen = set()
        for frame in stack.split(";"):
            if _OURS.search(frame):
                name = frame
                if name not in seen:
                    seen.add(name)
                    counts[name] += int(n)
    return sorted(((k, round(v / max(total, 1), 3)) for k, v in counts.items()), key=lambda kv: -kv[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("event_log", type=Path)
    parser.add_argument("--pyspy", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    jobs = read_jobs(args.event_log)
    span = (max(j.end_ms for j in jobs) - min(j.start_ms for j in jobs)) / 1000 if jobs else 0
    print(f"{len(jobs)} jobs over {span:.1f} s; jobs running {busy_seconds(jobs):.1f} s")
    for row in summarize_jobs(jobs)[: args.top]:
        print(f"{row['seconds']:8.2f} s {row['jobs']:4d} jobs  {row['call_site']}")
    if args.pyspy:
        print("\npy-spy, inclusive share of wall time:")
        for name, share in pyspy_inclusive(args.pyspy)[: args.top]:
            print(f"{share:6.1%}  {name}")


if __name__ == "__main__":
    main()
