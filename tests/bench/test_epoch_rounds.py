"""Part 1's one-process mode in rounds: the order of the sides rotates, and the step medians pool every round."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench import epochs, steps


class _Data:
    landing = "/landing"

    def partitions(self) -> list[str]:
        return ["p0", "p1", "p2"]


def test_rounds_rotate_the_order_of_the_sides_and_each_run_has_its_own_folder(tmp_path, monkeypatch):
    calls: list[tuple[str, Path]] = []
    monkeypatch.setattr(epochs, "_ss", lambda ds, work, partitions: calls.append(("ss", work)) or {"side": "ss"})
    monkeypatch.setattr(epochs, "_epochal", lambda config, partitions: calls.append((config.parent.name, config.parent))
                        or {"side": config.parent.name})

    runs, works = epochs._inprocess(_Data(), tmp_path, ("full", "core"), rounds=3)

    assert [side for side, _ in calls] == ["ss", "full", "core", "full", "core", "ss", "core", "ss", "full"]
    assert {side: len(r) for side, r in runs.items()} == {"ss": 3, "full": 3, "core": 3}
    assert works["full"] == [tmp_path / f"round-{r}" / "full" for r in range(3)]
    assert len({work for _, work in calls}) == 9
    assert all((work / "epochal.yaml").is_file() for side, work in calls if side != "ss")


def _report(epoch: int, seconds: float) -> dict:
    return {"epoch": epoch, "duration_s": seconds, "spark_jobs": 2, "compiled_classes": 0,
            "steps": {"stage:a": {"s": seconds, "jobs": 2, "compiled": 0}}}


def test_step_medians_pool_the_warm_epochs_of_every_round_with_each_rounds_own_commits():
    first = ([_report(0, 50.0), _report(1, 1.0), _report(2, 2.0)], Counter({(1, "stage:a"): 1, (2, "stage:a"): 1}))
    second = ([_report(0, 40.0), _report(1, 9.0), _report(2, 10.0)], Counter({(1, "stage:a"): 3, (2, "stage:a"): 3}))

    rows = {row["step"]: row for row in steps.step_rows([first, second])}

    # the first epoch of each process is left out: warm epochs 1, 2, 9, 10
    assert rows["stage:a"]["seconds"] == rows["epoch"]["seconds"] == 5.5
    assert rows["stage:a"]["delta_commits"] == 2.0  # 1, 1, 3, 3: each report counted against its own round
