"""Named crash points of the epoch protocol, for fault-injection tests.

``EPOCHAL_CRASH_AT=<point>[:<epoch>]`` makes the process kill itself with
SIGKILL when it reaches ``point`` (optionally only at that epoch), as a real
crash would: no cleanup, no finally blocks, no flushed buffers.
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "after_trigger",
    "after_plan",
    "in_stage",
    "after_state_write",
    "after_last_ack",
    "after_metadata",
    "in_sink",
    "in_retention",
    "in_savepoint",
    "after_epoch",
)


def crashpoint(point: str, epoch: int | None = None) -> None:
    """Die here if the environment asks for it."""
    wanted = os.environ.get("EPOCHAL_CRASH_AT")
    if not wanted:
        return
    name, _, at = wanted.partition(":")
    if name != point:
        return
    if at and epoch is not None and int(at) != epoch:
        return
    os.kill(os.getpid(), signal.SIGKILL)
