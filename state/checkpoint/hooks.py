"""User hooks called on trigger and on restore (Flink's MasterTriggerRestoreHook).

A hook records something outside epochal's state at each checkpoint (say, an
external queue's offsets) and gets it back on restore. What it returns on
trigger is stored, as JSON, in the checkpoint's ``_metadata`` under its
identifier.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from epochal.state.errors import HookError, InvalidCheckpointRequest
from epochal.state.checkpoint.metadata import require_json
from epochal.state.ids import CheckpointId, Epoch


@runtime_checkable
class MasterTriggerRestoreHook(Protocol):
    """A user hook; ``identifier`` must be unique and stable across versions."""

    @property
    def identifier(self) -> str: ...

    def trigger_checkpoint(self, checkpoint_id: CheckpointId, epoch: Epoch) -> Any | None:
        """Return JSON-able state to store with the checkpoint, or None for nothing."""
        ...

    def restore_checkpoint(self, checkpoint_id: CheckpointId, state: Any | None) -> None:
        """Restore from the state stored at trigger (None if none was stored)."""
        ...


def check_identifiers(hooks: Sequence[MasterTriggerRestoreHook]) -> None:
    """Raise InvalidCheckpointRequest if two hooks share an identifier."""
    seen: set[str] = set()
    for hook in hooks:
        if hook.identifier in seen:
            raise InvalidCheckpointRequest(
                f"Two master hooks have the identifier {hook.identifier!r}.",
                action="give every hook a unique identifier.",
                identifier=hook.identifier,
            )
        seen.add(hook.identifier)


def trigger_hooks(
    hooks: Sequence[MasterTriggerRestoreHook], checkpoint_id: CheckpointId, epoch: Epoch
) -> dict[str, Any]:
    """Call every hook's trigger; return the non-None states by identifier (HookError on failure)."""
    states: dict[str, Any] = {}
    for hook in hooks:
        state = _call(hook, "trigger", lambda h=hook: h.trigger_checkpoint(checkpoint_id, epoch))
        if state is not None:
            states[hook.identifier] = _json_state(hook, state)
    return states


def restore_hooks(
    hooks: Sequence[MasterTriggerRestoreHook],
    checkpoint_id: CheckpointId,
    states: Mapping[str, Any],
    *,
    allow_non_restored_state: bool = False,
) -> None:
    """Give every hook its stored state; a state no hook claims is an error unless allowed."""
    unclaimed = sorted(set(states) - {h.identifier for h in hooks})
    if unclaimed and not allow_non_restored_state:
        raise HookError(
            f"Checkpoint {checkpoint_id} has state for master hooks that are not registered: {unclaimed}.",
            action="register those hooks, or restore with allow_non_restored_state=True to drop their state.",
            checkpoint_id=checkpoint_id,
            identifiers=unclaimed,
        )
    for hook in hooks:
        _call(hook, "restore", lambda h=hook: h.restore_checkpoint(checkpoint_id, states.get(h.identifier)))


def _call(hook: MasterTriggerRestoreHook, phase: str, action: Any) -> Any:
    try:
        return action()
    except Exception as exc:  # user code boundary: any error in a hook is the hook's
        raise HookError(
            f"Master hook {hook.identifier!r} failed on {phase}: {type(exc).__name__}: {exc}.",
            action=f"fix the hook {hook.identifier!r}.",
            identifier=hook.identifier,
            phase=phase,
        ) from exc


def _json_state(hook: MasterTriggerRestoreHook, state: Any) -> Any:
    try:
        return require_json(state, what=f"the state of master hook {hook.identifier!r}")
    except InvalidCheckpointRequest as exc:
        raise HookError(exc.message, action=exc.action, identifier=hook.identifier, phase="trigger") from exc
