"""Errors raised by the checkpoint engine.

Every error carries structured attributes (the state, the table, the checkpoint)
and a sentence on what to do next, so a caller never parses a message.
"""

from __future__ import annotations

from epochal.errors import EpochalError


class EpochalStateError(EpochalError):
    """Base of every error raised by ``state/`` (message, ``action``, ``context``: see :class:`EpochalError`)."""


class StateDescriptorError(EpochalStateError):
    """A state descriptor is malformed (bad name, bad schema, bad TTL)."""


class StateSchemaError(EpochalStateError):
    """Values written to a state do not match its declared schema."""


class MaxParallelismMismatch(EpochalStateError):
    """A state table was created with another maximum parallelism than requested."""


class StateTableNotFound(EpochalStateError):
    """A state table or one of its versions is missing."""
