"""What ``epochal verify`` found: one result per scenario, as a table for people or a JSON document."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from epochal.pipeline.verify.compare import TableDiff


class Outcome(str, Enum):
    REFERENCE = "reference"  # the straight run every other scenario is compared with
    MATCH = "match"
    DIFFERS = "differs"
    NON_DETERMINISTIC = "non-deterministic"  # two straight runs differ
    NOT_REACHED = "not reached"  # the run finished before the crash point or instant (not a failure)
    SKIPPED = "skipped"
    FAILED = "failed"  # a run or the resume failed with an error (not a SIGKILL)

    def __str__(self) -> str:
        return self.value


PASSING = {Outcome.REFERENCE, Outcome.MATCH, Outcome.NOT_REACHED, Outcome.SKIPPED}


@dataclass
class ScenarioResult:
    name: str  # e.g. "crash in_sink (epoch 1)"
    kind: str  # straight | crash | random | restore | savepoint
    outcome: Outcome
    diffs: list[TableDiff] = field(default_factory=list)
    detail: str | None = None
    duration_s: float = 0.0
    crash: str | None = None  # the EPOCHAL_CRASH_AT / EPOCHAL_CRASH_AFTER_S the killed process had
    note: str | None = None  # a difference that is not a failure (operator state after a rescale)

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING

    def summary(self) -> str:
        """The table's differences column."""
        if self.diffs:
            first = self.diffs[0].describe()
            more = f" (+{len(self.diffs) - 1} more table(s))" if len(self.diffs) > 1 else ""
            return first + more
        if self.outcome in (Outcome.MATCH, Outcome.REFERENCE):
            return "none" + (" (note below)" if self.note else "")
        return self.detail or "-"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "result": self.outcome.value,
            "passed": self.passed,
            "differences": [d.to_dict() for d in self.diffs],
            "detail": self.detail,
            "duration_s": round(self.duration_s, 2),
            "crash": self.crash,
            "note": self.note,
        }


@dataclass
class VerifyReport:
    pipeline: str
    from_key: str
    to_key: str
    epochs: int
    workdir: str | None
    kept: bool
    scenarios: list[ScenarioResult] = field(default_factory=list)
    #: Expressions in what the stages write whose values a re-run need not repeat (not failures).
    warnings: list[str] = field(default_factory=list)
    #: The stages whose own plans introduced those expressions, each with them (where a difference comes from).
    sources: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.passed for s in self.scenarios)

    @property
    def non_deterministic(self) -> list[TableDiff]:
        return [d for s in self.scenarios if s.outcome is Outcome.NON_DETERMINISTIC for d in s.diffs]

    def reason(self) -> str:
        """One line: why verification failed."""
        if nd := self.non_deterministic:
            writers = sorted({d.stage for d in nd if d.stage})
            if not self.sources:  # nothing in the plans explains it: the stages whose tables differ
                return (f"non-deterministic stage {', '.join(writers) or '?'}: two straight runs differ in "
                        f"{nd[0].describe()}")
            where = "; ".join(f"{stage}: {', '.join(items)}" for stage, items in self.sources.items())
            shown = f" (written by stage {', '.join(writers)})" if writers and writers != list(self.sources) else ""
            return (f"non-deterministic stage {', '.join(self.sources)} ({where}): two straight runs differ in "
                    f"{nd[0].describe()}{shown}")
        failed = [s for s in self.scenarios if not s.passed]
        first = failed[0]
        return f"{len(failed)} scenario(s) failed; {first.name}: {first.summary()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pipeline": self.pipeline,
            "from": self.from_key,
            "to": self.to_key,
            "epochs": self.epochs,
            "workdir": self.workdir if self.kept else None,
            "non_deterministic": [d.to_dict() for d in self.non_deterministic],
            "scenarios": [s.to_dict() for s in self.scenarios],
            "warnings": list(self.warnings),
            "warning_stages": dict(self.sources),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    def table(self, width: int = 100) -> str:
        """scenario | result | differences, one line per scenario, then the verdict."""
        rows = [("scenario", "result", "time", "differences")]
        rows += [(s.name, s.outcome.value.upper() if not s.passed else s.outcome.value, f"{s.duration_s:.0f}s",
                  s.summary()) for s in self.scenarios]
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        w2 = max(len(r[2]) for r in rows)
        lines = [f"epochal verify: pipeline {self.pipeline}, partitions {self.from_key} .. {self.to_key} ({self.epochs} epochs)", ""]
        for i, (a, b, c, d) in enumerate(rows):
            room = max(width - w0 - w1 - w2 - 6, 20)
            if len(d) > room:  # the failures' full differences follow the table
                d = d[: room - 3] + "..."
            lines.append(f"{a:<{w0}}  {b:<{w1}}  {c:>{w2}}  {d}")
            if i == 0:
                lines.append(f"{'-' * w0}  {'-' * w1}  {'-' * w2}  {'-' * 11}")
        failed = [s for s in self.scenarios if not s.passed]
        lines.append("")
        if self.ok:
            but = " (but for the notes below)" if any(s.note for s in self.scenarios) else ""
            but += " (read the warnings below)" if self.warnings else ""
            lines.append(f"OK: {len(self.scenarios)} scenarios, the sinks and the state equal the straight run's{but}")
        else:
            lines.append(f"FAILED: {self.reason()}")
            for s in failed:
                for d in s.diffs:
                    lines.append(f"  {s.name}: {d.describe()}")
        lines += [f"  note: {s.name}: {s.note}" for s in self.scenarios if s.note]
        if self.warnings:
            lines.append("warnings: these runs agree, but a re-run elsewhere (a cluster, a rescale, other file sizes, "
                         "a crash's recovery) may not:" if self.ok else
                         "warnings: what the plans hold whose values a re-run need not repeat (where differences come from):")
            lines += [f"  {w}" for w in self.warnings]
        if self.kept and self.workdir:
            lines.append(f"kept: {self.workdir}")
        return "\n".join(lines)
