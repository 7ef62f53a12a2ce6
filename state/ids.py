"""Typed identifiers used across the engine (Flink's CheckpointID, epoch)."""

from __future__ import annotations

from typing import NewType

CheckpointId = NewType("CheckpointId", int)
Epoch = NewType("Epoch", int)
StageName = NewType("StageName", str)
StateName = NewType("StateName", str)
