"""Spark settings against each other on small warm epochs, in alternating rounds.

``python -m bench.settings_ab --setting NAME=JSON [--setting ...] [--rounds 3] [--epochs 6]``
runs the clickstream example over the demo's data (12 users, 60 events an hour)
once per setting and round, each run a fresh process (``epochal run`` over all
epochs in one process), the settings in turn inside each round so that a machine
that gets slower or busier meanwhile weighs on every setting alike. ``JSON`` is
a ``spark.conf`` mapping added to epochal's defaults (``{}``: the defaults); a key
without the ``spark.`` prefix is one of epochal's ``spark`` settings instead
(e.g. ``{"state_rewrite_below_mb": 0}``).
It writes ``bench/results/settings_ab.json`` and ``settings_ab.md``: per
setting, the median warm epoch of each run (epochs after the second), their
median, and the first epoch's median. This machine is shared and varies by a
fifth from run to run: read a difference only when it holds in every round.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import RESULTS, WORK, emit, median, run_child, stamp

FIRST_WARM = 2  # epochs 0 and 1 pay for the JVM's start and its JIT warm-up
EVENTS_PER_HOUR = 60
USERS = 12


def _child(conf: dict[str, str], epochs: int, work: Path) -> dict[str, Any]:
    """One run over ``epochs`` hourly partitions in this process: the epochs' seconds."""
    import shutil

    import yaml

    from epochal.config import load_settings
    from epochal.orchestration.cli import main
    from epochal.orchestration.demo import DEMO_START, demo_settings
    from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    settings = demo_settings(work)
    settings["spark"]["conf"] = {k: v for k, v in conf.items() if k.startswith("spark.")}
    settings["spark"].update({k: v for k, v in conf.items() if not k.startswith("spark.")})  # epochal's spark.* keys
    config = work / "epochal.yaml"
    config.write_text(yaml.safe_dump(settings))
    generate(load_settings(config).landing, DEMO_START, epochs, GeneratorConfig(users=USERS, events_per_hour=EVENTS_PER_HOUR, seed=7))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--config", str(config), "--json", "run", "--to", (DEMO_START + timedelta(hours=epochs - 1)).strftime("%Y-%m-%d-%H:%M")])
    if code:
        raise SystemExit(f"epochal run failed with {conf}: exit {code}")
    report = json.loads(out.getvalue())
    return {"epochs_s": [e["duration_s"] for e in report["epochs"]]}


def summarize(runs: dict[str, list[list[float]]]) -> dict[str, dict[str, Any]]:
    """Per setting: each run's median warm epoch, their median, and the median first epoch."""
    summary = {}
    for name, epochs in runs.items():
        warm = [median(e[FIRST_WARM:]) for e in epochs if len(e) > FIRST_WARM]
        summary[name] = {
            "warm_medians_s": warm,
            "warm_median_s": median(warm),
            "first_epoch_s": median([e[0] for e in epochs]),
        }
    return summary


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Spark settings on small warm epochs",
        "",
        f"Measured {result['when']}, load average {result['load']}; {result['epochs']} epochs of "
        f"{EVENTS_PER_HOUR} events per run, {result['rounds']} alternating rounds (bench/settings_ab.py).",
        "",
        "| setting | spark.conf added | warm epoch per round (s) | median (s) | first epoch (s) |",
        "|---|---|---|---|---|",
    ]
    for name, row in result["summary"].items():
        conf = json.dumps(result["settings"][name]) if result["settings"][name] else "(epochal's defaults)"
        rounds = ", ".join(f"{w:.2f}" for w in row["warm_medians_s"])
        lines.append(f"| {name} | `{conf}` | {rounds} | {row['warm_median_s']} | {row['first_epoch_s']} |")
    return "\n".join(lines) + "\n"


def _setting(text: str) -> tuple[str, dict[str, str]]:
    name, sep, conf = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--setting {text!r}: expected NAME=JSON, e.g. defaults={{}}")
    try:
        parsed = json.loads(conf)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--setting {name}: not JSON ({exc})") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"--setting {name}: expected a JSON object of spark.conf keys")
    # Spark's spelling of JSON's booleans: "true", "false"
    return name, {str(k): json.dumps(v) if isinstance(v, bool) else str(v) for k, v in parsed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", action="append", type=_setting, default=[], metavar="NAME=JSON")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", metavar="JSON", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=WORK / "settings-ab")
    args = parser.parse_args()
    if args.child is not None:
        emit(_child(json.loads(args.child), args.epochs, args.work))
        return
    settings = dict(args.setting) or {"defaults": {}}
    if args.epochs <= FIRST_WARM:
        parser.error(f"--epochs must be above {FIRST_WARM}: the first {FIRST_WARM} epochs are not warm")
    started = stamp()
    runs: dict[str, list[list[float]]] = {name: [] for name in settings}
    for round_ in range(args.rounds):
        for name, conf in settings.items():
            child = run_child("bench.settings_ab", ["--child", json.dumps(conf), "--epochs", args.epochs, "--work", args.work / name])
            runs[name].append(child["epochs_s"])
            print(f"round {round_ + 1} {name}: {child['epochs_s']}", file=sys.stderr, flush=True)
    result = {**started, "epochs": args.epochs, "rounds": args.rounds,
              "settings": settings, "runs": runs, "summary": summarize(runs)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "settings_ab.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "settings_ab.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
