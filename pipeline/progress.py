"""The runner's durable position between checkpoints (``<checkpoints>/progress.json``).

``in_progress`` is set before an epoch touches anything and cleared when every
write of the epoch is done; a run that finds it set knows the last run died
mid-epoch and restores the latest completed checkpoint before going on.

``restoring`` is set before a restore touches anything (state tables, the
completed-checkpoint store, sinks) and cleared with the new position when it is
done; a run that finds it set knows a restore died half-way and does it again
(a restore is idempotent: Delta ``RESTORE``/overwrite to a fixed snapshot,
sinks rewound to a fixed epoch) before going on.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from epochal.pipeline.errors import PipelineError
from epochal.state.checkpoint.storage import CheckpointStorage
from epochal.state.fence import Fence, no_fence

PROGRESS_FILE = "progress.json"


@dataclass(frozen=True)
class Progress:
    last_done_epoch: int | None = None
    in_progress: int | None = None
    #: An unfinished restore, checked and chosen: ``{"pointer": id or path, "parallelism": int or None}``
    #: or ``{"empty": true}`` (see :meth:`ProgressStore.restoring`).
    restoring: dict[str, Any] | None = None
    #: The parallelism the pipeline runs with, once ``restore --parallelism`` changed it (None: the config's).
    parallelism: int | None = None
    #: The states (``stage/state``) the pipeline declared when its last epoch or restore ended: the working tables
    #: hold those (None: not recorded, a file from before it was).
    states: tuple[str, ...] | None = None
    #: The partitioning that numbered the epochs (``{"start": ISO time, "granularity": ...}``; None: a file from before
    #: it was recorded). Epoch N is the Nth window from ``start``: changing either would renumber every epoch.
    partitions: dict[str, str] | None = None

    @property
    def clean(self) -> bool:
        return self.in_progress is None and self.restoring is None

    @property
    def in_flight(self) -> float:
        """The latest epoch an unfinished run or restore may have touched (any, for a restore)."""
        if self.restoring is not None:
            return float("inf")
        epochs = [e for e in (self.in_progress, self.last_done_epoch) if e is not None]
        return max(epochs, default=-1)


class ProgressStore:
    def __init__(self, storage: CheckpointStorage, fence: Fence = no_fence, states: Iterable[str] | None = None,
                 partitions: dict[str, str] | None = None) -> None:
        self._storage = storage
        self._path = storage.child(PROGRESS_FILE)
        self._fence = fence
        self._states = None if states is None else tuple(sorted(states))  # the pipeline's, recorded at each end
        self._partitions = partitions  # the configuration's, recorded at every write

    @property
    def path(self) -> str:
        return self._path

    def exists(self) -> bool:
        """False when no run ever started here, or the file was deleted."""
        return self._storage.exists(self._path)

    def load(self) -> Progress:
        if not self._storage.exists(self._path):
            return Progress()
        raw = self._storage.read(self._path)
        try:
            data = json.loads(raw)
            states = data.get("states")
            if states is not None and not (isinstance(states, list) and all(isinstance(s, str) for s in states)):
                raise ValueError(f"states must be null or a list of names, got {states!r}")
            partitions = data.get("partitions")
            if partitions is not None and not (isinstance(partitions, dict) and all(isinstance(v, str) for v in partitions.values())):
                raise ValueError(f"partitions must be null or an object of strings, got {partitions!r}")
            progress = Progress(data.get("last_done_epoch"), data.get("in_progress"), data.get("restoring"),
                                data.get("parallelism"), None if states is None else tuple(states), partitions)
            epochs = (progress.last_done_epoch, progress.in_progress)
            if not all(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) for v in epochs):
                raise ValueError(f"epochs must be null or integers >= 0, got {data}")
            p = progress.parallelism
            if p is not None and (not isinstance(p, int) or isinstance(p, bool) or p < 1):
                raise ValueError(f"parallelism must be null or an integer >= 1, got {p!r}")
            if progress.restoring is not None and not isinstance(progress.restoring, dict):
                raise ValueError(f"restoring must be null or an object, got {progress.restoring!r}")
        except (ValueError, AttributeError) as exc:
            raise PipelineError(
                f"the run position file {self._path} is corrupt ({type(exc).__name__}: {exc}; {len(raw)} bytes): "
                "refusing to guess where the state is. Restore a checkpoint or savepoint with `epochal restore`, "
                "which rewrites it."
            ) from exc
        return progress

    def save(self, progress: Progress) -> None:
        self._fence("write the run position")
        record = asdict(progress) | ({"partitions": self._partitions} if self._partitions is not None else {})
        self._storage.write_atomic(self._path, json.dumps(record).encode())

    def start(self, epoch: int) -> None:
        current = self.load()
        self.save(Progress(current.last_done_epoch, epoch, parallelism=current.parallelism, states=current.states))

    def restoring(self, target: dict[str, Any], *, last_done_epoch: int | None) -> None:
        """Mark a restore as started (before it changes anything); :meth:`reset` ends it."""
        self.save(Progress(last_done_epoch, None, dict(target), self.recorded_parallelism()))

    def done(self, epoch: int) -> None:
        self.save(Progress(epoch, None, parallelism=self.recorded_parallelism(), states=self._states))

    def reset(self, last_done_epoch: int | None, *, parallelism: int | None = None) -> None:
        """End a restore at ``last_done_epoch``; ``parallelism`` (a rescale) is kept from then on."""
        self.save(Progress(last_done_epoch, None, parallelism=parallelism or self.recorded_parallelism(),
                           states=self._states))

    def recorded_parallelism(self) -> int | None:
        """The parallelism a restore set (None: the configuration's), also while the file is being rewritten."""
        try:
            return self.load().parallelism
        except PipelineError:  # a corrupt file is being rewritten by a restore
            return None
