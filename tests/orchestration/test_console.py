"""What the commands print without --json (orchestration/console.py): tables made from the --json documents.

The documents here have the shape the commands' --json prints (tests/orchestration/test_cli_clickstream.py
checks the tables of real checkpoints through the CLI)."""

from __future__ import annotations

import pytest

from epochal.orchestration import console
from epochal.orchestration.cli import _print

EPOCH = {
    "epoch": 3, "partition": "2026-11-01-03:00", "duration_s": 7.687, "checkpoint_id": 4, "checkpoint_status": "completed",
    "sink_rows": {"quarantine": 250, "user_totals": 235},
}
RESTORED = {
    "checkpoint_id": 3, "kind": "checkpoint", "epoch": 2, "partition": "2026-11-01-02:00", "parallelism": 2,
    "metadata_path": "file:///ck/chk-3/_metadata", "skipped": [], "sinks_by_version": ["user_totals"],
    "sinks_by_content": ["quarantine"], "sink_gap": None,
}


def test_a_run_prints_the_restore_it_did_then_a_line_per_epoch_then_its_failure():
    document = {"epochs": [EPOCH, {**EPOCH, "epoch": 4, "partition": "2026-11-01-04:00", "checkpoint_id": None,
                                   "checkpoint_status": "declined", "sink_rows": {}}],
                "restored": RESTORED, "jit": "tiered",
                "failed": {"epoch": 5, "partition": "2026-11-01-05:00", "reason": "stage 'sum' failed", "action": "fix it"}}
    lines = console.run(document).splitlines()
    assert lines[0] == "restored checkpoint 3 (epoch 2, 2026-11-01-02:00), parallelism 2"
    assert "  sinks back to their recorded versions: user_totals" in lines and "  sinks rewound by content: quarantine" in lines
    table = lines[lines.index("") + 1:]
    assert table[0].split() == ["epoch", "partition", "took", "checkpoint", "rows", "written"]
    assert table[2].split() == ["3", "2026-11-01-03:00", "7.7", "s", "4", "completed", "quarantine", "250,", "user_totals", "235"]
    assert table[3].split() == ["4", "2026-11-01-04:00", "7.7", "s", "declined", "-"]
    assert table[-2:] == ["FAILED at epoch 5 (2026-11-01-05:00): stage 'sum' failed", "  fix it"]


def test_a_run_with_nothing_to_do_says_so():
    assert console.run({"epochs": [], "restored": None, "jit": None}) == (
        "no epoch to run: the state is already at the requested partition")


def test_state_rows_come_as_a_table_whose_long_values_are_cut():
    long = {"items": list(range(100))}
    text = console.state_rows({"stage": "s", "state": "m", "rows": [{"key": "a", "value": long}, {"key": "b", "value": None}]})
    title, header, rule, a, b = text.splitlines()
    assert title == "s/m: 2 rows" and header.split() == ["key", "value"]
    assert a.startswith("a    {\"items\": [0, 1,") and a.endswith("...") and len(a.split(None, 1)[1]) == console.CELL
    assert b.split() == ["b", "-"]
    assert console.state_rows({"stage": "s", "state": "m", "rows": []}) == "s/m: 0 rows"
    working = {"stage": "s", "state": "m", "rows": [], "read": {"checkpoint": None, "epoch": 4, "unfinished": "the last run ..."}}
    assert console.state_rows(working) == "s/m: 0 rows (the working table, after epoch 4)\nnote: the last run ..."
    at = {"stage": "s", "state": "m", "rows": [], "read": {"checkpoint": 7, "epoch": 3, "version": 5}}
    assert console.state_rows(at) == "s/m: 0 rows (checkpoint 7, epoch 3, table version 5)"


@pytest.mark.parametrize("n, text", [(None, "-"), (812, "812 B"), (4400, "4.3 KiB"), (1174183, "1.1 MiB"), (3 * 1024**4, "3.0 TiB")])
def test_sizes_read_as_a_person_reads_them(n, text):
    assert console.size(n) == text


def test_commands_without_a_view_print_their_path_or_json_and_json_is_always_the_document(capsys):
    _print({"path": "file:///ck/savepoints/x", "epoch": 2}, False, "savepoint")
    assert capsys.readouterr().out == "file:///ck/savepoints/x\n"
    _print({"checkpoints": []}, False, "checkpoints list")
    assert capsys.readouterr().out == "no completed checkpoint or savepoint\n"
    _print({"checkpoints": []}, True, "checkpoints list")
    assert capsys.readouterr().out == '{"checkpoints": []}\n'
    _print({"was_failed": True, "cleared": ["checkpoint 3: TASK_FAILURE"]}, False, "checkpoints reset-failures")
    assert capsys.readouterr().out.splitlines() == [
        "cleared 1 checkpoint failure(s); the pipeline may run again:", "  checkpoint 3: TASK_FAILURE"]
