"""Why a checkpoint was declined or failed (Flink's CheckpointFailureReason).

Each reason says whether it is *pre-flight* (the trigger was declined before
an id was allocated: nothing to clean up) and whether it *counts* towards the
consecutive-failure limit of the :class:`CheckpointFailureManager`.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from pydantic import BaseModel, ConfigDict


class CheckpointFailureReason(str, Enum):
    """A decline or failure reason; the value is the member name."""

    pre_flight: bool
    counts: bool
    message: str

    def __new__(cls, value: str, pre_flight: bool, counts: bool, message: str) -> CheckpointFailureReason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.pre_flight = pre_flight
        member.counts = counts
        member.message = message
        return member

    # Pre-flight: the trigger is declined, no checkpoint id is used.
    COORDINATOR_SHUTDOWN = ("COORDINATOR_SHUTDOWN", True, False, "The checkpoint coordinator is shut down.")
    PIPELINE_FAILED = ("PIPELINE_FAILED", True, False, "The pipeline has failed: too many consecutive checkpoint failures.")
    TOO_MANY_CONCURRENT_CHECKPOINTS = (
        "TOO_MANY_CONCURRENT_CHECKPOINTS", True, False,
        "The maximum number of concurrent pending checkpoints is reached.",
    )
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = (
        "MINIMUM_TIME_BETWEEN_CHECKPOINTS", True, False,
        "The minimum pause since the last completed checkpoint has not passed.",
    )
    NOT_ALL_REQUIRED_TASKS_RUNNING = (
        "NOT_ALL_REQUIRED_TASKS_RUNNING", True, False,
        "Not all stages and sinks that must acknowledge are able to run.",
    )
    IO_EXCEPTION = ("IO_EXCEPTION", True, True, "An I/O error occurred while triggering the checkpoint.")
    # After an id is allocated: the checkpoint is failed and recorded.
    TRIGGER_HOOK_FAILED = ("TRIGGER_HOOK_FAILED", False, True, "A master trigger hook failed.")
    CHECKPOINT_EXPIRED = ("CHECKPOINT_EXPIRED", False, True, "The checkpoint expired before all acknowledgements arrived.")
    CHECKPOINT_DECLINED = ("CHECKPOINT_DECLINED", False, True, "A stage or sink declined the checkpoint.")
    # As in Flink, a task failure does not count: the run fails with the task's own error, and the next run
    # restores the latest completed checkpoint and replays (the restart strategy's job, not the failure manager's).
    TASK_FAILURE = ("TASK_FAILURE", False, False, "A stage or sink failed while processing the epoch.")
    FINALIZE_FAILED = (
        "FINALIZE_FAILED", False, True,
        "Completing the checkpoint (writing _metadata or committing it to the store) failed.",
    )
    CHECKPOINT_SUBSUMED = ("CHECKPOINT_SUBSUMED", False, False, "A newer checkpoint completed first.")
    CHECKPOINT_ABORTED_ON_SHUTDOWN = (
        "CHECKPOINT_ABORTED_ON_SHUTDOWN", False, False, "The coordinator shut down with the checkpoint pending.",
    )
    CHECKPOINT_ABORTED_PIPELINE_FAILED = (
        "CHECKPOINT_ABORTED_PIPELINE_FAILED", False, False, "The pipeline failed with the checkpoint pending.",
    )


class CheckpointFailure(BaseModel):
    """One failed or declined checkpoint: which, why, when (a frozen record)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: int | None
    reason: CheckpointFailureReason
    detail: str = ""
    at: datetime

    def describe(self) -> str:
        """One line: ``checkpoint 7: CHECKPOINT_EXPIRED (detail)``."""
        who = "trigger" if self.checkpoint_id is None else f"checkpoint {self.checkpoint_id}"
        extra = f" ({self.detail})" if self.detail else ""
        return f"{who}: {self.reason.value}{extra}"
