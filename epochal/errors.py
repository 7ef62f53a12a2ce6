"""The root of every error epochal raises: ``except epochal.EpochalError`` catches them all.

Each error carries a message, an optional ``action`` (the sentence an operator acts on,
appended as "Operator action: ..."), and structured ``context`` (ids, paths, keys), so a
caller never parses the text. The layers refine it: ``ConfigError`` (bad configuration,
before any work), ``EpochalStateError`` (the checkpoint engine), ``PipelineError`` (the
runtime; ``StageError`` wraps an exception raised by a user's stage code).
"""

from __future__ import annotations


class EpochalError(Exception):
    """Base of every error epochal raises."""

    def __init__(self, message: str = "", *, action: str | None = None, **context: object) -> None:
        self.message = message
        self.action = action
        self.context = context
        stop = "" if message.rstrip().endswith((".", "!", "?", ":", ";")) else "."  # one sentence ends first
        super().__init__(message if action is None else f"{message}{stop} Operator action: {action}")
