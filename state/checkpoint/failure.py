"""Consecutive checkpoint failures (Flink's CheckpointFailureManager).

``tolerable_failures`` consecutive failed checkpoints are allowed; one more
fails the pipeline with every reason. Reasons whose ``counts`` is False
(declines such as TOO_MANY_CONCURRENT_CHECKPOINTS, a subsumed checkpoint, a
shutdown) neither count nor reset. A success resets the count. The state is
persisted so that a new process knows the pipeline is failed.
"""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from epochal.state.errors import CheckpointError, PipelineFailed
from epochal.state.checkpoint.reasons import CheckpointFailure
from epochal.state.checkpoint.storage import CheckpointStorage

log = logging.getLogger(__name__)


class FailureState(BaseModel):
    """The consecutive failures since the last success, and whether the pipeline failed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    failures: tuple[CheckpointFailure, ...] = ()
    failed: bool = False

    @property
    def consecutive(self) -> int:
        return len(self.failures)


class FailureStateRepository(Protocol):
    def load(self) -> FailureState: ...

    def save(self, state: FailureState) -> None: ...


class InMemoryFailureStateRepository:
    def __init__(self, state: FailureState | None = None) -> None:
        self._state = state or FailureState()

    def load(self) -> FailureState:
        return self._state

    def save(self, state: FailureState) -> None:
        self._state = state


class StorageFailureStateRepository:
    """The failure state as one JSON file in checkpoint storage, written atomically."""

    def __init__(self, storage: CheckpointStorage, path: str | None = None) -> None:
        self._storage = storage
        self._path = path or storage.failure_state_path

    def load(self) -> FailureState:
        if not self._storage.exists(self._path):
            return FailureState()
        try:
            return FailureState.model_validate_json(self._storage.read(self._path))
        except ValidationError as exc:
            raise CheckpointError(
                f"The checkpoint failure state {self._path} is unreadable: {exc}.",
                action="delete the file to reset the failure count.",
                path=self._path,
            ) from exc

    def save(self, state: FailureState) -> None:
        self._storage.write_atomic(self._path, state.model_dump_json(indent=2).encode("utf-8"))


class CheckpointFailureManager:
    """Counts consecutive failed checkpoints and decides when the pipeline fails."""

    def __init__(self, tolerable_failures: int = 0, repository: FailureStateRepository | None = None) -> None:
        if tolerable_failures < 0:
            raise ValueError("tolerable_failures must be >= 0")
        self.tolerable_failures = tolerable_failures
        self._repository = repository if repository is not None else InMemoryFailureStateRepository()
        self._state = self._repository.load()

    @property
    def state(self) -> FailureState:
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._state.consecutive

    @property
    def pipeline_failure(self) -> PipelineFailed | None:
        """The PipelineFailed error if the pipeline has failed, else None."""
        return self._error() if self._state.failed else None

    def record_failure(self, failure: CheckpointFailure) -> PipelineFailed | None:
        """Count ``failure`` (if its reason counts); return PipelineFailed once the limit is passed."""
        if not failure.reason.counts or self._state.failed:
            return self.pipeline_failure
        failures = self._state.failures + (failure,)
        self._save(FailureState(failures=failures, failed=len(failures) > self.tolerable_failures))
        return self.pipeline_failure

    def record_success(self) -> None:
        """A completed checkpoint resets the count (a failed pipeline stays failed until reset)."""
        if self._state.failures and not self._state.failed:
            self._save(FailureState())

    def check(self) -> None:
        """Raise PipelineFailed if the pipeline has failed."""
        error = self.pipeline_failure
        if error is not None:
            raise error

    def reset(self) -> None:
        """Operator action: forget the failures (after fixing their cause)."""
        self._save(FailureState())

    def _save(self, state: FailureState) -> None:
        self._state = state
        try:
            self._repository.save(state)
        except (CheckpointError, OSError) as exc:
            log.warning("could not persist the checkpoint failure state: %s", exc)

    def _error(self) -> PipelineFailed:
        return PipelineFailed(self._state.failures, self.tolerable_failures)
