"""State handles: what a snapshot of a state table is (Flink's KeyedStateHandle).

A handle names one Delta version of one state table. It is small, frozen and
serialisable, so it can travel in acks and be written into ``_metadata``.
"""

from __future__ import annotations

import warnings
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class StateKind(str, Enum):
    KEYED = "keyed"
    OPERATOR = "operator"
    BROADCAST = "broadcast"


warnings.filterwarnings("ignore", message='Field name "schema_json"', category=UserWarning)


class StateHandle(BaseModel):
    """One Delta version of one state table."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: str
    state: str
    kind: StateKind
    state_type: str = Field(description="value | list | map | reducing | aggregating | split | union | broadcast | ...")
    table_path: str
    version: int = Field(ge=0)
    rows: int = Field(ge=0)
    bytes_total: int = Field(ge=0, description="bytes of the data files live in this version")
    bytes_added: int = Field(ge=0, description="bytes of files (data and deletion vectors) added by this version")
    schema_json: str = Field(description="Spark schema of the table, as JSON")
    max_parallelism: int | None = Field(default=None, ge=1)
    parallelism: int | None = Field(default=None, ge=1)

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.state}"
