"""Fencing: a writer that lost the right to write is refused before it writes.

A fence is a callable ``fence(action)`` that returns when this process may still write
the deployment's storage and raises :class:`epochal.state.errors.WriterFenced` (a
subclass of it) otherwise; ``action`` names the write it guards ("commit checkpoint 7",
"write state sum/total"), for the error. ``state/`` only calls it: who may write is
decided above it (``epochal.pipeline.lease``: the lease's generation is the token), so
the checkpoint engine does not depend on the pipeline. A fence must be cheap (no Spark):
it runs before every commit and every table write.
"""

from __future__ import annotations

from collections.abc import Callable

Fence = Callable[[str], None]


def no_fence(action: str) -> None:
    """The fence of a writer that nothing fences (tests, in-memory coordinators)."""
    return None
