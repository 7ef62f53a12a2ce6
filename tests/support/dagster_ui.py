"""Driving the Dagster UI in headless Chromium as a person does (used by tests/orchestration/test_dagster_live.py).

Selectors are roles and visible text, never generated CSS classes. Every wait has a deadline (against hanging,
not a timing assertion). When a step fails, :func:`diagnose` leaves a screenshot and the page's text in /tmp and
the error says where, so the failure shows what the page showed.
"""

from __future__ import annotations

import re
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

CHROMIUM = "/usr/bin/chromium"
LONG = 120_000  # ms: the first page load compiles the UI's bundle and queries the code location
#: Launched from the materialize dialog: "Created backfill abcdefgh" (a toast) or "Launched run <uuid>".
BACKFILL_TOAST = re.compile(r"Created backfill (\w+)")
RUN_LINK = re.compile(r"/runs/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


@contextmanager
def browser_page(width: int = 1600, height: int = 1000) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def diagnose(page, step: str) -> str:
    """A screenshot and the text of the page in /tmp: returns where, for the failure's message."""
    base = Path(tempfile.gettempdir()) / f"dagster-ui-{re.sub(r'[^a-z0-9]+', '-', step.lower())}"
    try:
        page.screenshot(path=f"{base}.png", full_page=True)
        Path(f"{base}.txt").write_text(f"{page.url}\n\n{page.locator('body').inner_text(timeout=10_000)}")
    except Exception as error:  # noqa: BLE001 - the diagnosis must not hide the failure
        print(f"could not save the page for {step}: {error!r}", file=sys.stderr)
    return f"{step} failed on {page.url}; the page is in {base}.png and {base}.txt"


@contextmanager
def step(page, name: str) -> Iterator[None]:
    """A step of the walk through the UI: on failure, the page is saved and the error says where."""
    try:
        yield
    except Exception as error:
        raise AssertionError(f"{diagnose(page, name)}: {error}") from error


def goto(page, url: str) -> None:
    page.goto(url, wait_until="networkidle", timeout=LONG)
    dismiss_welcome(page)


def dismiss_welcome(page) -> None:
    """A fresh instance greets the first visit with a "Join the Dagster community" dialog: skip it."""
    if getattr(page, "_welcome_skipped", False):  # Dagster remembers it (local storage): no five-second wait again
        return
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(state="visible", timeout=5_000)
    except Exception:  # noqa: BLE001 - no dialog this time
        return
    skip.click()
    skip.wait_for(state="hidden", timeout=10_000)
    page._welcome_skipped = True


def settle(page, ms: int = 1500) -> None:
    """Let a graph or chart finish its layout before a picture (not an assertion)."""
    page.wait_for_timeout(ms)


def shot(page, path: Path, *, full_page: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=full_page)
    return path


def open_materialize(page):
    """Click the graph's "Materialize all" (every asset the graph shows): returns the partition dialog."""
    # The accessible name starts with the icon's label and ends with the count: "... Materialize all (11)…".
    page.get_by_role("button", name=re.compile(r"Materialize all")).first.click(timeout=LONG)
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Partition selection").wait_for(timeout=LONG)
    return dialog


def choose_partitions(dialog, selection: str, count: int) -> None:
    """Type the selection in the dialog's partition input ("a" or "[a...b]"), as one types a range in it."""
    box = dialog.locator("input[type=text]").first
    box.click()
    box.fill(selection)
    box.press("Enter")
    label = f"{count} partition" + ("s" if count != 1 else "")
    dialog.get_by_text(label, exact=True).wait_for(timeout=30_000)


def launch_backfill(page, dialog) -> str:
    """Click "Launch backfill": returns the backfill's id from the "Created backfill" toast."""
    dialog.get_by_role("button", name="Launch backfill").click()
    toast = page.get_by_text(BACKFILL_TOAST).first
    toast.wait_for(timeout=LONG)
    return BACKFILL_TOAST.search(toast.inner_text()).group(1)


def wait_status(status, done: str, failed: str, deadline_ms: int) -> str:
    """Wait until ``status`` (a locator) shows ``done`` or ``failed`` (regex alternatives); the UI polls and
    re-renders on its own. Fails at once on ``failed``."""
    from playwright.sync_api import expect

    expect(status).to_have_text(re.compile(rf"^\s*({done}|{failed})\s*$"), timeout=deadline_ms)
    text = status.inner_text().strip()
    assert re.fullmatch(done, text), f"the UI shows {text!r}"
    return text


def away_until(page, finished: Callable[[], object]) -> None:
    """The person leaves the tab while a run works (``finished`` returns when it has, over GraphQL), then comes
    back to its page. A Dagster page left open re-renders on every poll (every 2 s): a headless renderer on
    the test machine's two cores, taken from the run it watches."""
    page.goto("about:blank")
    finished()


def backfill_status(page):
    """The backfill page's status: the value under its "Status" label (its table has "Succeeded" and "Failed"
    columns, so the words alone are not enough)."""
    return page.get_by_text("Status", exact=True).first.locator("xpath=following-sibling::*[1]")


def run_status(page):
    """The run page's status tag, next to the run's id in its header."""
    return page.get_by_text(re.compile(r"^(Queued|Not started|Starting|Started|Success|Failure|Canceling|Canceled)$")).first


def checkpoint_plots(page, url: str, path: Path) -> Path:
    """The checkpoint asset's numeric metadata plotted per materialization.

    Dagster 1.13's open-source asset page plots numeric metadata on its Overview tab: the Metadata section's
    "Plots" toggle, then its "Events" toggle (one point per materialization, over time). Its "Partitions"
    toggle plots only the latest 120 partition keys up to now, so it is empty for these past hours. The plots
    are in the page's own scroll container: a taller viewport shows them all.
    """
    goto(page, f"{url}/assets/checkpoint")
    # A toggle button's accessible name starts with its icon's label ("asset_plot Plots", "materialization Events").
    page.get_by_role("button", name=re.compile(r"\bPlots$")).click(timeout=LONG)
    page.get_by_role("button", name=re.compile(r"\bEvents$")).click(timeout=30_000)
    page.get_by_text("bytes_written", exact=True).first.wait_for(state="visible", timeout=60_000)
    page.locator("canvas").first.wait_for(state="visible", timeout=60_000)
    page.set_viewport_size({"width": 1600, "height": 2000})
    settle(page, 2000)
    shot(page, path, full_page=True)
    page.set_viewport_size({"width": 1600, "height": 1000})
    return path
