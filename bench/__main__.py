"""``python -m bench``: run the benchmark parts and write ``bench/results/`` (see bench/README.md).

Each part stores its section of ``results.json`` as soon as it finishes, so
parts can be run (and re-run) separately; the markdown and plots are then
rebuilt from everything in the file.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench import backfill, churn, epochs, state_size
from bench.common import DRIVER_MEMORY, MASTER, RESULTS, WORK, load_results, save_results, stamp
from bench.report import write_report
from bench.ss_job import SS_DRIVER

PARTS = ("epochs", "churn", "state", "backfill")
FULL = {"sizes": [5_000, 1_000_000], "epochs": [6, 3], "churn_keys": 1_000_000,
        "state_sizes": [100_000, 1_000_000, 10_000_000], "repeats": 2, "backfill": [5_000, 24]}
QUICK = {"sizes": [300], "epochs": [2], "churn_keys": 5_000, "state_sizes": [1_000, 10_000], "repeats": 1,
         "backfill": [300, 3]}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the harness, not the numbers")
    parser.add_argument("--sizes", type=_ints, help="events per epoch for part 1 (default 5000,1000000)")
    parser.add_argument("--epochs", type=_ints, help="epochs per size for part 1 (default 6,3)")
    parser.add_argument("--modes", default=",".join(epochs.MODES))
    parser.add_argument("--variants", default="full,core")
    parser.add_argument("--rounds", type=int, default=3,
                        help="part 1, in-process mode: each side's process this many times, the order rotating "
                             "(3: each side once in each place)")
    parser.add_argument("--churn-keys", type=int)
    parser.add_argument("--state-sizes", type=_ints)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--backfill-sides", default=",".join(backfill.SIDES),
                        help=f"backfill part: the sides to measure, of {tuple(backfill.SIDES)} (the others keep their last figures)")
    parser.add_argument("--backfill-rounds", type=int,
                        help="backfill part: one-run backfills (default 3, 1 with --quick), each launched at "
                             "another place of the daemon's 30 s cycle (bench/backfill.py)")
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    plan = dict(QUICK if args.quick else FULL)
    for key in ("sizes", "epochs", "churn_keys", "state_sizes", "repeats"):
        if getattr(args, key) is not None:
            plan[key] = getattr(args, key)
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s) {sorted(unknown)}; parts are {PARTS}")
    path = args.results / "results.json"
    results = load_results(path)
    results["environment"] = {
        "cpus": os.cpu_count(), "master": MASTER, "driver_memory": DRIVER_MEMORY, "quick": args.quick,
        "ss_driver": SS_DRIVER,
    }
    measured = results.setdefault("measured", {})  # when each section was measured, and the load then
    if "epochs" in parts:
        for events, count in zip(plan["sizes"], plan["epochs"]):
            section = results.setdefault("epochs", {})
            started = stamp()
            run = epochs.run_size(
                events, count, modes=args.modes.split(","), variants=tuple(args.variants.split(",")), work=args.work,
                rounds=1 if args.quick else args.rounds,
            )
            section.setdefault(str(events), {}).update(run)  # other modes measured before are kept
            measured.update({f"epochs {events} {mode}": started for mode in args.modes.split(",")})
            save_results(path, results)
    if "churn" in parts:
        measured["churn"] = stamp()
        results["churn"] = churn.measure(args.work / "churn", plan["churn_keys"], repeats=plan["repeats"])
        save_results(path, results)
    if "state" in parts:
        measured["state_size"] = stamp()
        results["state_size"] = state_size.run_sizes(plan["state_sizes"], args.work, repeats=plan["repeats"])
        save_results(path, results)
    if "backfill" in parts:
        previous = results.get("backfill")
        if previous and "measured_at" not in previous and "backfill" in measured:  # figures from before the stamp
            previous["measured_at"] = measured["backfill"]["when"]
        measured["backfill"] = stamp()
        events, hours = plan["backfill"]
        sides = tuple(x for x in args.backfill_sides.split(",") if x)
        rounds = args.backfill_rounds or (1 if args.quick else 3)
        results["backfill"] = backfill.measure(args.work, events=events, hours=hours, sides=sides,
                                               previous=results.get("backfill"), rounds=rounds)
        save_results(path, results)
    for written in write_report(results, args.results):
        print(written)


if __name__ == "__main__":
    main()
