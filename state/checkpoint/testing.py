"""Test helpers: handles, failing fakes and a simulated crash (Quix's FailingSink style).

Shipped with the package so the engine's own tests (restore, file release,
the epoch runner) can reuse them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from epochal.state.checkpoint.completed import CompletedCheckpoint
from epochal.state.errors import CheckpointStorageError
from epochal.state.checkpoint.metadata import CheckpointKind
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.checkpoint.store import CompletedCheckpointStore
from epochal.state.handles import StateHandle, StateKind
from epochal.state.ids import CheckpointId


class SimulatedCrash(BaseException):
    """The process dies here: not an Exception, so no engine code catches it."""


def make_handle(stage: str, state: str = "s", version: int = 0, *, rows: int = 10, bytes_added: int = 100) -> StateHandle:
    """A small keyed-state handle for tests."""
    return StateHandle(
        stage=stage, state=state, kind=StateKind.KEYED, state_type="value",
        table_path=f"file:///tmp/epochal-test/{stage}/{state}", version=version, rows=rows,
        bytes_total=bytes_added * (version + 1), bytes_added=bytes_added,
        schema_json='{"type":"struct","fields":[]}', max_parallelism=128, parallelism=2,
    )


class FailingStorage(CheckpointStorage):
    """A storage whose writes fail for paths ``fail_when(path)`` says, with ``error()``."""

    def __init__(self, base_url: str, *, fail_when: Callable[[str], bool] = lambda _: False,
                 error: Callable[[str], BaseException] | None = None) -> None:
        super().__init__(base_url)
        self.fail_when = fail_when
        self.error = error or (lambda path: CheckpointStorageError(f"injected write failure at {path}", path=path))

    def write_atomic(self, url: str, data: bytes) -> None:
        if self.fail_when(url):
            raise self.error(url)
        super().write_atomic(url, data)


class FailingStore:
    """Wraps a store; ``add`` raises ``error`` before (or after) delegating while ``armed``."""

    def __init__(self, inner: CompletedCheckpointStore, *, error: BaseException | None = None,
                 after_commit: bool = False) -> None:
        self.inner = inner
        self.max_retained = inner.max_retained
        self.error = error
        self.after_commit = after_commit

    def add(self, checkpoint: CompletedCheckpoint) -> list[CompletedCheckpoint]:
        if self.error is not None and not self.after_commit:
            raise self.error
        subsumed = self.inner.add(checkpoint)
        if self.error is not None:
            raise self.error
        return subsumed

    def latest(self, kind: CheckpointKind | None = None) -> CompletedCheckpoint | None:
        return self.inner.latest(kind)

    def get(self, checkpoint_id: int) -> CompletedCheckpoint | None:
        return self.inner.get(checkpoint_id)

    def all(self) -> list[CompletedCheckpoint]:
        return self.inner.all()

    def known_ids(self) -> list[int]:
        return self.inner.known_ids()

    def remove(self, checkpoint_id: int) -> CompletedCheckpoint:
        return self.inner.remove(checkpoint_id)

    def awaiting_release(self) -> list[CompletedCheckpoint]:
        return self.inner.awaiting_release()

    def mark_released(self, checkpoint_ids: Iterable[int]) -> None:
        self.inner.mark_released(checkpoint_ids)


class RecordingHook:
    """A master hook that returns ``state`` on trigger and records every call."""

    def __init__(self, identifier: str, state: Any = None, *, fail_on: str | None = None) -> None:
        self._identifier = identifier
        self.state = state
        self.fail_on = fail_on
        self.triggered: list[tuple[CheckpointId, int]] = []
        self.restored: list[tuple[CheckpointId, Any]] = []

    @property
    def identifier(self) -> str:
        return self._identifier

    def trigger_checkpoint(self, checkpoint_id: CheckpointId, epoch: int) -> Any:
        if self.fail_on == "trigger":
            raise RuntimeError("hook trigger failed")
        self.triggered.append((checkpoint_id, epoch))
        return self.state

    def restore_checkpoint(self, checkpoint_id: CheckpointId, state: Any) -> None:
        if self.fail_on == "restore":
            raise RuntimeError("hook restore failed")
        self.restored.append((checkpoint_id, state))
