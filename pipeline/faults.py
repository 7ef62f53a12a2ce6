"""Crashes on demand, for fault-injection tests: at named points, or at a random instant.

``EPOCHAL_CRASH_AT=<point>[:<epoch>][@<n>]`` makes the process kill itself
with SIGKILL when it reaches ``point`` (optionally only at that epoch) for the
``n``-th time (default 1: ``in_stage:1@2`` is the second stage of epoch 1), as
a real crash would: no cleanup, no finally blocks, no flushed buffers.

``EPOCHAL_CRASH_AFTER_S=<seconds>`` SIGKILLs the process that many seconds
after the timer is armed: by :func:`arm_crash_timer`, or else at the first
crash point reached (the start of the first epoch, or of a savepoint), so the
instant falls anywhere in the work, not in the JVM's start-up.

``EPOCHAL_PAUSE_AT=<point>[:<epoch>][@<n>]`` (same syntax) makes the process stop
itself with SIGSTOP there instead, as a process that stalls (a long GC pause, a
frozen VM) would, until someone sends it SIGCONT: the fencing tests let its lease
expire meanwhile.
"""

from __future__ import annotations

import os
import signal
import threading
from enum import Enum

class CrashPoint(str, Enum):
    """The named crash points; a member equals its name (``CrashPoint.IN_SINK == "in_sink"``)."""

    AFTER_TRIGGER = "after_trigger"
    AFTER_PLAN = "after_plan"
    IN_STAGE = "in_stage"
    AFTER_STATE_WRITE = "after_state_write"
    AFTER_LAST_ACK = "after_last_ack"
    AFTER_METADATA = "after_metadata"
    IN_SINK = "in_sink"
    IN_RETENTION = "in_retention"
    IN_SAVEPOINT = "in_savepoint"
    IN_RESTORE = "in_restore"
    AFTER_EPOCH = "after_epoch"

    def __str__(self) -> str:
        return self.value


#: Every point's name, in the order of the protocol.
POINTS: tuple[str, ...] = tuple(p.value for p in CrashPoint)


_timer: threading.Timer | None = None
_hits: dict[str, int] = {}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm_crash_timer() -> None:
    """Start the ``EPOCHAL_CRASH_AFTER_S`` countdown (once per process; a no-op if unset)."""
    global _timer
    delay = os.environ.get("EPOCHAL_CRASH_AFTER_S")
    if not delay or _timer is not None:
        return
    _timer = threading.Timer(float(delay), _die)
    _timer.daemon = True
    _timer.start()


def crashpoint(point: str | CrashPoint, epoch: int | None = None) -> None:
    """Die here if the environment asks for it (or stop, for ``EPOCHAL_PAUSE_AT``)."""
    arm_crash_timer()
    if _reached("EPOCHAL_PAUSE_AT", point, epoch):
        os.kill(os.getpid(), signal.SIGSTOP)  # every thread stops, the heartbeat too, until SIGCONT
    if _reached("EPOCHAL_CRASH_AT", point, epoch):
        _die()


def _reached(variable: str, point: str | CrashPoint, epoch: int | None) -> bool:
    """True when ``variable`` (``<point>[:<epoch>][@<n>]``) names this point and this is its ``n``-th hit."""
    wanted = os.environ.get(variable)
    if not wanted:
        return False
    wanted, _, nth = wanted.partition("@")
    name, _, at = wanted.partition(":")
    if name != str(point):
        return False
    if at and epoch is not None and int(at) != epoch:
        return False
    key = f"{variable}={wanted}"
    _hits[key] = _hits.get(key, 0) + 1
    return _hits[key] == int(nth or 1)
