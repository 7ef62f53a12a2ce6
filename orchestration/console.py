"""What a command prints without ``--json``: plain tables a person reads at a terminal.

``--json`` prints the command's whole document, the contract for scripts; this text is for people and may
change. The columns follow Flink's checkpoint history (id, status, trigger time, duration, checkpointed and
full size) and its ``flink run`` output, one line per epoch. Commands without a view here print their
document as indented JSON; those whose result is a path print the path.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable, Sequence

#: ``state read`` cuts values wider than this (``...``): ``--json`` has every value whole.
CELL = 60


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, a dashed rule under the headers; ``right``: right-aligned columns."""
    cells = [[_cell(v) for v in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    rule = ["-" * w for w in widths]

    def line(row: Sequence[str]) -> str:
        padded = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(padded).rstrip()

    return "\n".join([line(cells[0]), line(rule), *(line(r) for r in cells[1:])])


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    return text.replace("\n", " ")


def _cut(value: Any) -> str:
    text = _cell(value)
    return text if len(text) <= CELL else text[: CELL - 3] + "..."


def size(n: int | None) -> str:
    """Bytes as a person reads them: ``812 B``, ``4.3 KiB``, ``1.1 MiB``."""
    if n is None:
        return "-"
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"


def seconds(s: float | None) -> str:
    return "-" if s is None else f"{s:.1f} s"


def _when(text: str | None) -> str:
    """An ISO instant as ``2026-11-30 07:50:34 UTC`` (the text as given when it does not parse)."""
    if not text:
        return "-"
    try:
        return datetime.fromisoformat(text).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return text


# ----------------------------------------------------------------------------- the commands

def checkpoints(document: dict[str, Any]) -> str:
    """``epochal checkpoints list``: one line per retained checkpoint and savepoint, oldest first."""
    rows = [
        [c["id"], f"{c['kind']} {c['name']}" if c.get("name") else c["kind"], _status(c), c["epoch"], c["partition"], _when(c["created"]), seconds(c["duration_s"]),
         c["state_rows"], size(c["state_bytes"]), size(c["bytes_written"]), c["parallelism"], c["metadata_path"]]
        for c in document["checkpoints"]
    ]
    if not rows:
        return "no completed checkpoint or savepoint"
    headers = ["id", "kind", "status", "epoch", "partition", "completed", "duration", "state rows", "state size",
               "written", "parallelism", "metadata"]
    return text_table(headers, rows, right=(0, 3, 6, 7, 8, 9, 10))


def _status(c: dict[str, Any]) -> str:
    """The retention status, whether the snapshot is off the state's history (restored only when named), and
    whether its ``_metadata`` is gone (a savepoint folder deleted by hand: listed, no longer restorable) or corrupt."""
    notes = ([] if c.get("on_history", True) else ["off history"]) + ([] if c.get("present", True) else ["missing"])
    notes += ["corrupt"] if c.get("corrupt") else []
    return ", ".join([c["status"], *notes])


def checkpoint(document: dict[str, Any]) -> str:
    """``epochal checkpoints inspect ID``: the checkpoint, its state handles, its source positions."""
    c = document
    lines = [
        f"{c['kind']} {c['id']} ({_status(c)}): epoch {c['epoch']}, partition {c['partition']}",
        f"  completed    {_when(c['created'])}, in {seconds(c['duration_s'])}",
        f"  state        {c['state_rows']} rows, {size(c['state_bytes'])} ({size(c['bytes_written'])} written by it)",
        f"  parallelism  {c['parallelism']}",
        f"  metadata     {c['metadata_path']}",
        "",
    ]
    handles = [
        [h["stage"], h["state"], h["kind"], h.get("state_type"), h["version"], h["rows"], size(h["bytes_total"]),
         size(h["bytes_added"]), h["table_path"]]
        for h in c.get("handles", [])
    ]
    headers = ["stage", "state", "kind", "type", "version", "rows", "size", "written", "table"]
    lines.append(text_table(headers, handles, right=(4, 5, 6, 7)) if handles else "no state handles")
    positions = c.get("source_positions") or {}
    if positions:
        lines += ["", "source positions"] + [f"  {name}: {json.dumps(p, default=str)}" for name, p in positions.items()]
    return "\n".join(lines)


def run(document: dict[str, Any]) -> str:
    """``epochal run``: the restore it did first, one line per epoch, and the failure that stopped it."""
    lines = []
    restored = document.get("restored")
    if restored:
        lines += [restore(restored), ""]
    epochs = document.get("epochs") or []
    if epochs:
        rows = [[e["epoch"], e["partition"], seconds(e["duration_s"]), _checkpoint_cell(e), _rows_cell(e)] for e in epochs]
        lines.append(text_table(["epoch", "partition", "took", "checkpoint", "rows written"], rows, right=(0, 2)))
    else:
        lines.append("no epoch to run: the state is already at the requested partition")
    failed = document.get("failed")
    if failed:
        lines += ["", f"FAILED at epoch {failed['epoch']} ({failed['partition']}): {failed['reason']}",
                  f"  {failed['action']}" if failed.get("action") else ""]
    return "\n".join(lines).rstrip()


def _checkpoint_cell(e: dict[str, Any]) -> str:
    status = e.get("checkpoint_status")
    if e.get("checkpoint_id") is None:
        return "-" if status is None else status
    return f"{e['checkpoint_id']} {status or ''}".strip()


def _rows_cell(e: dict[str, Any]) -> str:
    rows = e.get("sink_rows") or {}
    return ", ".join(f"{sink} {n}" for sink, n in rows.items()) or "-"


def restore(document: dict[str, Any]) -> str:
    """``epochal restore`` (and the restore a run did first): what came back, and how the sinks did."""
    r = document
    if r.get("checkpoint_id") is None:
        text = "restored nothing: the state starts empty"
    else:
        text = f"restored {r['kind']} {r['checkpoint_id']} (epoch {r['epoch']}, {r['partition']})"
    if r.get("parallelism") is not None:
        text += f", parallelism {r['parallelism']}"
    lines = [text]
    for skipped in r.get("skipped") or []:
        lines.append(f"  skipped: {_cell(skipped)}")
    for migrated in r.get("migrated") or []:
        lines.append(f"  migrated {migrated} (added, null in the restored rows)")
    for dropped in r.get("dropped") or []:
        lines.append(f"  dropped {dropped} (no stage declares it: --allow-non-restored-state)")
    if r.get("sinks_by_version"):
        lines.append(f"  sinks back to their recorded versions: {', '.join(r['sinks_by_version'])}")
    if r.get("sinks_by_content"):
        lines.append(f"  sinks rewound by content: {', '.join(r['sinks_by_content'])}")
    if r.get("sink_gap"):
        lines.append(f"  {r['sink_gap']}")
    if r.get("metadata_path"):
        lines.append(f"  metadata: {r['metadata_path']}")
    return "\n".join(lines)


def state_rows(document: dict[str, Any]) -> str:
    """``epochal state read``: the rows of one state table."""
    rows = document["rows"]
    title = f"{document['stage']}/{document['state']}: {len(rows)} row{'' if len(rows) == 1 else 's'}"
    read = document.get("read") or {}
    if read.get("checkpoint") is not None:
        title += f" (checkpoint {read['checkpoint']}, epoch {read['epoch']}, table version {read['version']})"
    elif read:
        title += " (the working table" + ("" if read.get("epoch") is None else f", after epoch {read['epoch']}") + ")"
    if read.get("unfinished"):
        title += f"\nnote: {read['unfinished']}"
    if not rows:
        return title
    headers = list(dict.fromkeys(k for row in rows for k in row))
    return title + "\n" + text_table(headers, [[_cut(row.get(h)) for h in headers] for row in rows])


def failures_cleared(document: dict[str, Any]) -> str:
    """``epochal checkpoints reset-failures``."""
    cleared = document.get("cleared") or []
    if not cleared:
        return "no checkpoint failure was recorded; nothing to clear"
    return "\n".join([f"cleared {len(cleared)} checkpoint failure(s); the pipeline may run again:"] + [f"  {c}" for c in cleared])


def demo(document: dict[str, Any]) -> str:
    """``epochal demo``: what it ran through Dagster, what the sinks hold, and what to try next."""
    epochs = [[e.get("epoch"), e.get("partition"), seconds(e.get("epoch_duration_s")),
               _checkpoint_cell(e), ", ".join(k for k, passed in (e.get("checks") or {}).items() if passed) or "-"]
              for e in document["epochs"]]
    top = [[u["user_id"], f"{u['revenue']:.2f}", u["events"]] for u in document["top_users"]]
    config = document["config"]
    return "\n".join([
        f"epochal demo in {document['dir']}", "",
        text_table(["epoch", "partition", "took", "checkpoint", "checks passed"], epochs, right=(0, 2)), "",
        "sink rows: " + ", ".join(f"{k} {v}" for k, v in document["sink_rows"].items()), "",
        "top users by revenue", text_table(["user", "revenue", "events"], top, right=(1, 2)), "",
        "checkpoints: " + ", ".join(f"{c['kind']} {c['id']} (epoch {c['epoch']})" for c in document["checkpoints"]),
        f"savepoint: {document['savepoint']}", "",
        "next:",
        f"  epochal checkpoints list --config {config}",
        f"  epochal state read dedupe seen --limit 5 --config {config}",
        f"  epochal ui --config {config}",
    ])


#: The text view of each command (``checkpoints`` by its action); the others print JSON or a path.
VIEWS: dict[str, Callable[[dict[str, Any]], str]] = {
    "run": run,
    "checkpoints list": checkpoints,
    "checkpoints inspect": checkpoint,
    "checkpoints reset-failures": failures_cleared,
    "restore": restore,
    "state": state_rows,
    "demo": demo,
}


def render(command: str, result: Any) -> str | None:
    """The text of ``result`` for ``command`` (``"checkpoints list"``...), or None where there is no view."""
    view = VIEWS.get(command)
    if view is None or not isinstance(result, dict):
        return None
    return view(result)
