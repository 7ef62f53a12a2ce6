"""Where an epoch's time goes, per step: seconds, Spark jobs, Delta commits and classes compiled (part 1, one process).

The seconds, Spark jobs and generated classes compiled come from the runner's reports (``EpochReport.steps``,
:mod:`epochal.pipeline.steps`). The Delta commits are counted from the tables themselves:
every commit an epoch makes carries ``epochal epoch <n> (<partition>): <step>`` as its
``userMetadata``, so the ``_delta_log`` JSON files under a deployment's folders say which
step of which epoch wrote each version.

The first epoch of a process (tables created, the JVM warming up) is left out of the
medians: they describe a warm epoch. With several rounds (``bench.epochs``), the medians pool
every round's warm epochs, each counted against its own deployment's Delta commits.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from bench.common import median

_LABEL = re.compile(r"^epochal epoch (\d+) \((.*?)\): (.+)$")


def delta_commits(roots: Iterable[Path]) -> Counter:
    """Commits per (epoch, step) in every Delta table under ``roots``, read from their ``_delta_log``."""
    counts: Counter = Counter()
    for root in roots:
        for commit in Path(root).glob("**/_delta_log/*.json"):
            if not commit.stem.isdigit():
                continue
            for line in commit.read_text().splitlines():
                info = json.loads(line).get("commitInfo") if line.strip() else None
                match = _LABEL.match((info or {}).get("userMetadata") or "")
                if match:
                    counts[(int(match.group(1)), match.group(3))] += 1
    return counts


def step_rows(runs: list[tuple[list[dict[str, Any]], Counter]]) -> list[dict[str, Any]]:
    """Per step, medians over the warm epochs of every run (its reports and its Delta commits): seconds, Spark jobs,
    Delta commits, classes compiled; then a total row."""
    warm = []
    for reports, commits in runs:
        first = min(r["epoch"] for r in reports)
        warm += [(r, commits) for r in reports if r["epoch"] > first] or [(r, commits) for r in reports]
    steps = list(dict.fromkeys(s for r, _ in warm for s in r.get("steps", {})))  # the runner's order (the DAG's)
    rows = []
    for step in steps:
        entries = [(r["steps"].get(step, {"s": 0.0, "jobs": 0}), commits[(r["epoch"], step)]) for r, commits in warm]
        # reports from before the runner counted generated classes have no "compiled": None, not 0
        rows.append({
            "step": step,
            "seconds": median([e["s"] for e, _ in entries]),
            "spark_jobs": median([e["jobs"] for e, _ in entries]),
            "delta_commits": median([c for _, c in entries]),
            "compiled": median([e["compiled"] for e, _ in entries if "compiled" in e]),
        })
    rows.append({
        "step": "epoch",
        "seconds": median([r["duration_s"] for r, _ in warm]),
        "spark_jobs": median([r.get("spark_jobs", 0) for r, _ in warm]),
        "delta_commits": median([sum(n for (e, _), n in c.items() if e == r["epoch"]) for r, c in warm]),
        "compiled": median([r["compiled_classes"] for r, _ in warm if "compiled_classes" in r]),
    })
    return rows


def summarize(runs: list[dict[str, Any]], works: list[Path]) -> dict[str, Any]:
    """The step table of one side's in-process runs (``bench.epochal_job`` outputs, one per round) and their
    deployment folders (``works[i]`` is ``runs[i]``'s)."""
    per_run = [([r for e in run["epochs"] for r in e["reports"]], delta_commits([work]))
               for run, work in zip(runs, works, strict=True)]
    return {"warm_epochs": sum(max(len(reports) - 1, 0) for reports, _ in per_run), "rows": step_rows(per_run)}


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def markdown(steps: dict[str, dict[str, Any]], events: int) -> list[str]:
    """One table per variant: the medians per step."""
    lines = [f"## 1b. Where a warm epoch's time goes, {events:,} events, one process (medians per step)", ""]
    for variant, table in steps.items():
        lines += [f"{variant} ({table['warm_epochs']} warm epochs):", "",
                  "| step | seconds | Spark jobs | Delta commits | classes compiled |", "|---|---|---|---|---|"]
        lines += [f"| {r['step']} | {r['seconds']} | {r['spark_jobs']} | {r['delta_commits']} | {_cell(r.get('compiled'))} |"
                  for r in table["rows"]]
        lines.append("")
    return lines
