"""The restore plan refuses a checkpoint holding states no descriptor claims, naming all of them at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from epochal.state.errors import UnclaimedStateError
from epochal.state.recovery.plan import RestoreOptions, plan_restore


def _checkpoint(*keys: str, savepoint: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(checkpoint_id=7, savepoint_name=savepoint, handles=[SimpleNamespace(key=k) for k in keys])


def test_every_unclaimed_state_is_named_in_one_error() -> None:
    options = RestoreOptions(targets={"sum/total": object()}, working_root="file:///nowhere")
    with pytest.raises(UnclaimedStateError) as refused:
        plan_restore(_checkpoint("sum/total", "counts/count", "sessions/open"), "file:///nowhere/_metadata", options)
    assert "Checkpoint 7 holds state counts/count, sessions/open that no current state descriptor claims" in str(refused.value)
    assert "drop them" in str(refused.value)
    assert refused.value.context["states"] == ["counts/count", "sessions/open"]


def test_one_unclaimed_state_is_named_alone() -> None:
    options = RestoreOptions(targets={}, working_root="file:///nowhere")
    with pytest.raises(UnclaimedStateError, match=r"holds state counts/count that .* to drop it\.$"):
        plan_restore(_checkpoint("counts/count"), "file:///nowhere/_metadata", options)


def test_a_savepoint_is_called_a_savepoint_by_its_name() -> None:
    options = RestoreOptions(targets={}, working_root="file:///nowhere")
    with pytest.raises(UnclaimedStateError, match=r"^Savepoint 7 \(before\) holds state counts/count that "):
        plan_restore(_checkpoint("counts/count", savepoint="before"), "file:///nowhere/_metadata", options)
