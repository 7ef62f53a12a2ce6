"""Results as a markdown table and PNG plots, from ``bench/results/results.json``.

``python -m bench.report`` rewrites ``results.md`` and the plots from the JSON
(each part of the benchmark stores its section there; the report shows what
is present).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import steps
from bench.common import RESULTS, load_results, median, ratio

MB = 1024 * 1024
TARGETS = {
    "epoch_vs_ss": 1.0,
    "epoch_vs_ss_core_small_warm": 0.7,  # issue 17: the core variant, about 5k events, one process
    "bytes_1pct_vs_changed_rows": 3.0,
    "restore_largest_vs_smallest": 1.5,
    "epoch_with_vs_without_checkpoint": 1.1,
    "memory_largest_vs_smallest": 1.2,
    "backfill_vs_its_epochs": 1.3,
}


# ----------------------------------------------------------------------------- ratios


def _epoch_ratios(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size_key, size in sorted(results.get("epochs", {}).items(), key=lambda kv: int(kv[0])):
        for mode in ("fresh", "inprocess"):
            summary = size.get(mode)
            if not summary:
                continue
            for variant, value in summary["ratio_epoch"].items():
                row = {"events": int(size_key), "mode": mode, "variant": variant, "ratio": value,
                       "epochal_s": summary["median_epoch_s"][variant], "ss_s": summary["median_epoch_s"]["ss"],
                       "equal": summary.get("correctness", {}).get("equal"), "rounds": summary.get("rounds", 1)}
                if mode == "fresh":
                    row |= {"process_ratio": summary["ratio_process"][variant],
                            "epochal_process_s": summary["median_process_s"][variant],
                            "ss_process_s": summary["median_process_s"]["ss"]}
                rows.append(row)
    return rows


def _mode(row: dict[str, Any]) -> str:
    """The mode column: the one-process mode says how many rounds its medians pool."""
    return row["mode"] + (f", {row['rounds']} rounds" if row["rounds"] > 1 else "")


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: measured ratio, the target, met or not."""
    rows = []
    for r in _epoch_ratios(results):
        name = f"epoch / SS, {r['events']:,} events, {r['variant']}, {r['mode']}"
        small_core = r["variant"] == "core" and r["mode"] == "inprocess" and r["events"] <= 10_000
        rows.append({"target": name, "key": "epoch_vs_ss_core_small_warm" if small_core else "epoch_vs_ss",
                     "value": r["ratio"]})
        if r["mode"] == "fresh":
            rows.append({"target": name + " (whole process)", "key": "epoch_vs_ss", "value": r["process_ratio"]})
    churn = results.get("churn")
    if churn and "0.01" in churn["incremental"]:
        rows.append({"target": f"bytes at 1% churn / changed-row bytes ({churn['keys']:,} keys)",
                     "key": "bytes_1pct_vs_changed_rows", "value": churn["incremental"]["0.01"]["ratio"]})
    state = results.get("state_size")
    if state and len(state) > 1:
        sizes = sorted(state, key=int)
        low, high = state[sizes[0]], state[sizes[-1]]
        span = f"{int(sizes[-1]):,} / {int(sizes[0]):,} keys"
        rows.append({"target": f"restore time, {span}", "key": "restore_largest_vs_smallest",
                     "value": ratio(high["restore_s"], low["restore_s"])})
        for k in ("python_peak_rss", "jvm_peak_rss", "jvm_heap_peak"):
            rows.append({"target": f"peak {k.replace('_', ' ')}, {span}", "key": "memory_largest_vs_smallest",
                         "value": ratio(high["memory"][k], low["memory"][k])})
    if state:
        rows.append({"target": "epoch with / without checkpoint (median over state sizes)",
                     "key": "epoch_with_vs_without_checkpoint",
                     "value": median([v["checkpoint_ratio"] for v in state.values()])})
    backfill = results.get("backfill")
    if backfill:
        with_start = backfill.get("one_run_vs_its_epochs_and_a_session_start")
        rows.append({"target": f"{backfill['partitions']}-partition Dagster backfill in one run / (the sum of its epochs"
                               + (" + one session start)" if with_start is not None else ")"),
                     "key": "backfill_vs_its_epochs",
                     "value": with_start if with_start is not None else backfill["one_run_vs_its_epochs"]})
    for row in rows:
        row["limit"] = TARGETS[row["key"]]
        row["met"] = row["value"] is not None and row["value"] <= row["limit"]
    return rows


# ----------------------------------------------------------------------------- markdown


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join("" if c is None else str(c) for c in row) + " |" for row in rows]
    return out + [""]


_SS_DRIVERS = {
    "pyspark": "PySpark's as it comes",
    "epochal": "PySpark with epochal's py4j view (EPOCHAL_BENCH_SS_DRIVER=epochal)",
}


def markdown(results: dict[str, Any]) -> str:
    lines = ["# epochal benchmark results", ""]
    env = results.get("environment", {})
    if env:
        lines += [f"Machine: {env.get('cpus')} CPUs (shared); Spark `{env.get('master')}`, "
                  f"driver heap {env.get('driver_memory')}; the Structured Streaming job's driver: "
                  f"{_SS_DRIVERS.get(env.get('ss_driver', 'epochal'))}.", ""]
    measured = results.get("measured", {})
    if measured:
        lines += ["When each section was measured, and the machine's load average (1, 5, 15 min) as it started "
                  "(a load near 0 is a quiet machine; the figures of a loaded one are slower on both sides):", ""]
        lines += _table(["section", "started (UTC)", "load average"],
                        [[name, m.get("when"), m.get("load")] for name, m in sorted(measured.items())])
    lines += ["## Targets", ""]
    lines += _table(["measure", "ratio", "target", "met"],
                    [[t["target"], t["value"], f"<= {t['limit']}", "yes" if t["met"] else "**no**"] for t in targets(results)])
    epochs = _epoch_ratios(results)
    if epochs:
        lines += ["## 1. Epoch time against Structured Streaming (medians, seconds)", ""]
        lines += _table(
            ["events/epoch", "mode", "epochal variant", "epochal epoch", "SS epoch", "ratio", "epochal process",
             "SS process", "process ratio", "outputs equal"],
            [[f"{r['events']:,}", _mode(r), r["variant"], r["epochal_s"], r["ss_s"], r["ratio"],
              r.get("epochal_process_s"), r.get("ss_process_s"), r.get("process_ratio"), r["equal"]] for r in epochs])
    for size_key, size in sorted(results.get("epochs", {}).items(), key=lambda kv: int(kv[0])):
        if (size.get("inprocess") or {}).get("steps"):
            lines += steps.markdown(size["inprocess"]["steps"], int(size_key))
    churn = results.get("churn")
    if churn:
        lines += [f"## 2. Bytes written per checkpoint, {churn['keys']:,}-key state", ""]
        rows = [[f"{float(f):.0%}", v["bytes_written"], v["changed_row_bytes"], v["ratio"], v["epoch_s"]]
                for f, v in churn["incremental"].items()]
        full = churn["full"]
        rows.append([f"full checkpoint ({full['fraction']:.0%} changed)", full["bytes_written"], full["changed_row_bytes"],
                     full["ratio"], full["epoch_s"]])
        lines += _table(["keys changed", "bytes written", "changed-row bytes", "ratio", "epoch s"], rows)
    state = results.get("state_size")
    if state:
        lines += ["## 3-5. Restore, checkpoint cost and driver memory against state size (medians)", ""]
        rows = []
        for keys in sorted(state, key=int):
            v = state[keys]
            m = v["memory"]
            rows.append([f"{int(keys):,}", v["restore_s"], v["epoch_without_checkpoint_s"], v["epoch_with_checkpoint_s"],
                         v["checkpoint_ratio"], round(m["python_peak_rss"] / MB), round(m["jvm_peak_rss"] / MB),
                         round(m["jvm_heap_peak"] / MB)])
        lines += _table(["keys", "restore s", "epoch s (no checkpoint)", "epoch s (checkpoint)", "ratio",
                         "Python peak RSS MB", "JVM peak RSS MB", "JVM heap peak MB"], rows)
    lines += _backfill_table(results.get("backfill"))
    return "\n".join(lines)


def _backfill_table(backfill: dict[str, Any] | None) -> list[str]:
    if not backfill:
        return []
    lines = [f"## 6. A Dagster backfill of {backfill['partitions']} hourly partitions, {backfill['events']:,} events each "
             "(launch to end, seconds)", ""]
    rows = [[side, v["status"], v["runs"], v["wall_s"], v["epochs_sum_s"] if side == "one_run" else "",
             v.get("kept_from") or backfill.get("measured_at", "")]
            for side, v in ((s, backfill[s]) for s in ("one_run", "run_per_epoch") if s in backfill)]
    lines += _table(["side", "status", "runs", "wall s", "sum of its epochs s", "measured"], rows)
    rounds = backfill.get("one_run_rounds") or []
    if len(rounds) > 1:
        lines += [f"One run over the range in {len(rounds)} rounds, each launched at another place of the backfill "
                  "daemon's 30 s cycle; the table's `one_run` is the round of median ratio:", ""]
        lines += _table(["round", "launched after the webserver answered s", "wall s", "sum of its epochs s",
                         "daemon: launch to run s", "daemon: run end to backfill end s", "ratio"],
                        [[i + 1, r.get("delay_s"), r["wall_s"], r["epochs_sum_s"],
                          r.get("daemon_waits", {}).get("to_first_run_s", ""),
                          r.get("daemon_waits", {}).get("after_last_run_s", ""), r.get("ratio_with_session_start")]
                         for i, r in enumerate(rounds)])
    if backfill.get("one_run_vs_run_per_epoch") is not None:
        lines += [f"One run over the range takes {backfill['one_run_vs_run_per_epoch']}x the wall time of one run per epoch."]
    if backfill.get("one_run_vs_its_epochs") is not None:
        lines += [f"Its wall time is {backfill['one_run_vs_its_epochs']}x the sum of its epochs"
                  + (f", and {backfill['one_run_vs_its_epochs_and_a_session_start']}x that sum plus one session start "
                     f"({backfill['session_start_s']} s, a fresh process building the SparkSession)."
                     if backfill.get("one_run_vs_its_epochs_and_a_session_start") is not None else ".")]
    return lines + [""]


# ----------------------------------------------------------------------------- plots


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for size_key, size in results.get("epochs", {}).items():
        modes = [m for m in ("fresh", "inprocess") if size.get(m)]  # only the modes measured at this size
        if not modes:
            continue
        fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            summary = size[mode]
            for side, rows in summary["epochs"].items():
                ax.plot(range(len(rows)), [r["epoch_s"] for r in rows], marker="o", label=side)
            ax.set(title=f"{int(size_key):,} events/epoch, {mode}", xlabel="epoch", ylabel="epoch time (s)")
            ax.legend()
        fig.tight_layout()
        written.append(_save(fig, out / f"epoch_time_{size_key}.png"))
        if (size.get("inprocess") or {}).get("steps"):
            written.append(_steps_plot(size["inprocess"]["steps"], int(size_key), out))
    churn = results.get("churn")
    if churn:
        fig, ax = plt.subplots(figsize=(6, 4))
        labels = [f"{float(f):.0%}" for f in churn["incremental"]] + ["full"]
        written_bytes = [v["bytes_written"] for v in churn["incremental"].values()] + [churn["full"]["bytes_written"]]
        changed = [v["changed_row_bytes"] for v in churn["incremental"].values()] + [churn["full"]["changed_row_bytes"]]
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], [b / MB for b in written_bytes], width=0.4, label="checkpoint bytes written")
        ax.bar([x + 0.2 for x in xs], [b / MB for b in changed], width=0.4, label="changed rows (parquet)")
        ax.set(xticks=list(xs), xticklabels=labels, ylabel="MB", title=f"Bytes per checkpoint, {churn['keys']:,} keys")
        ax.legend()
        written.append(_save(fig, out / "checkpoint_bytes.png"))
    state = results.get("state_size")
    if state:
        keys = sorted(state, key=int)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([int(k) for k in keys], [state[k]["restore_s"] for k in keys], marker="o")
        ax.set(xscale="log", xlabel="keys of state", ylabel="restore time (s)", title="Restore time against state size")
        ax.set_ylim(bottom=0)
        written.append(_save(fig, out / "restore_time.png"))
    return written


def _steps_plot(tables: dict[str, Any], events: int, out: Path) -> Path:
    """Seconds per step of a warm epoch, one bar per step and variant."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(tables), figsize=(6 * len(tables), 5), squeeze=False)
    for ax, (variant, table) in zip(axes[0], tables.items()):
        rows = [r for r in table["rows"] if r["step"] != "epoch"][::-1]
        ax.barh([r["step"] for r in rows], [r["seconds"] or 0 for r in rows])
        ax.set(title=f"{variant}: {events:,} events, warm epoch", xlabel="seconds (median)")
    fig.tight_layout()
    return _save(fig, out / f"epoch_steps_{events}.png")


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def write_report(results: dict[str, Any], out: Path = RESULTS) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(markdown(results) + "\n")
    return [out / "results.md", *plots(results, out)]


if __name__ == "__main__":
    for path in write_report(load_results(RESULTS / "results.json")):
        print(path)
