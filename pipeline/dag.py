"""A pipeline: sources, a DAG of stages, and sinks; validated before any work starts."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Sequence

from epochal.pipeline.errors import PipelineDefinitionError
from epochal.pipeline.sources import Source
from epochal.pipeline.stage import SinkSpec, Stage
from epochal.state.backends.timers import EventTimeTimers
from epochal.state.descriptors import KeyedStateDescriptor, OperatorStateDescriptor


_DAGSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _producer(ref: str) -> str:
    return ref.split(".", 1)[0]


def _check_state_declarations(stage: Stage) -> None:
    """Each ``keyed_state`` entry a keyed state descriptor, each ``operator_state`` entry an operator state one.

    An :class:`EventTimeTimers` listed in ``keyed_state`` stands for its descriptor (the timers are a value
    state): the stage's list is rewritten with the descriptor, which is what checkpoints hold."""
    keyed = [t.descriptor if isinstance(t, EventTimeTimers) else t for t in stage.keyed_state]
    for what, entries, kind in (("keyed_state", keyed, KeyedStateDescriptor),
                                ("operator_state", list(stage.operator_state), OperatorStateDescriptor)):
        wrong = [e for e in entries if not isinstance(e, kind)]
        if wrong:
            raise PipelineDefinitionError(
                f"stage {stage.name!r}: {what} holds {wrong[0]!r}, which is not a {kind.__name__} "
                f"(list the descriptors the stage reads and writes: {_KINDS[what]})"
            )
    if any(isinstance(t, EventTimeTimers) for t in stage.keyed_state):
        try:
            stage.keyed_state = tuple(keyed)
        except (AttributeError, TypeError) as exc:
            raise PipelineDefinitionError(
                f"stage {stage.name!r}: keyed_state lists EventTimeTimers; list their descriptor (timers.descriptor)"
            ) from exc


_KINDS = {
    "keyed_state": "ValueStateDescriptor, ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, "
                   "AggregatingStateDescriptor, an EventTimeTimers",
    "operator_state": "ListOperatorState, UnionListOperatorState, BroadcastState",
}


@dataclass
class Pipeline:
    name: str
    sources: Sequence[Source]
    stages: Sequence[Stage]
    sinks: Sequence[SinkSpec]
    max_parallelism: int = 128
    _order: list[Stage] = field(default_factory=list, init=False, repr=False)
    _consumers: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not _DAGSTER_NAME.match(str(self.name)):
            raise PipelineDefinitionError(
                f"pipeline name {self.name!r}: use letters, digits and underscores "
                "(it names the Dagster job, schedule and sensor)"
            )
        self._order = self._validate()
        for ref in [i for s in self.stages for i in s.inputs] + [s.input for s in self.sinks]:
            self._consumers[ref] = self._consumers.get(ref, 0) + 1

    def _outputs(self) -> set[str]:
        refs = {s.name for s in self.sources}
        for stage in self.stages:
            outs = list(stage.outputs)
            refs |= {f"{stage.name}.{o}" for o in outs}
            if len(outs) == 1:
                refs.add(stage.name)
        return refs

    def _validate(self) -> list[Stage]:
        names = [s.name for s in self.sources] + [s.name for s in self.stages] + [s.name for s in self.sinks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise PipelineDefinitionError(f"pipeline {self.name!r}: names used twice: {dupes}")
        known = self._outputs()
        for stage in self.stages:
            _check_state_declarations(stage)
            missing = [i for i in stage.inputs if i not in known]
            if missing:
                raise PipelineDefinitionError(f"stage {stage.name!r}: unknown input(s) {missing}; known: {sorted(known)}")
        for sink in self.sinks:
            if sink.input not in known:
                raise PipelineDefinitionError(f"sink {sink.name!r}: unknown input {sink.input!r}; known: {sorted(known)}")
        by_name = {s.name: s for s in self.stages}
        graph = {s.name: {_producer(i) for i in s.inputs if _producer(i) in by_name} for s in self.stages}
        try:
            order = list(TopologicalSorter(graph).static_order())
        except CycleError as exc:
            raise PipelineDefinitionError(f"pipeline {self.name!r}: stages form a cycle: {exc.args[1]}") from exc
        return [by_name[n] for n in order]

    @property
    def ordered_stages(self) -> list[Stage]:
        """Stages in DAG order."""
        return list(self._order)

    def computed_from(self, inputs: Sequence[str]) -> list[str]:
        """The stages whose outputs ``inputs`` (``<stage>.<output>``, a stage's name, or a source's) are computed
        from, directly or through other stages, in DAG order."""
        by_name = {s.name: s for s in self._order}
        found: set[str] = set()
        todo = [ref.partition(".")[0] for ref in inputs]
        while todo:
            name = todo.pop()
            if name in by_name and name not in found:
                found.add(name)
                todo += [ref.partition(".")[0] for ref in by_name[name].inputs]
        return [s.name for s in self._order if s.name in found]

    def readers(self, stage: Stage, output: str) -> int:
        """How many stages and sinks read ``output`` of ``stage`` (a lone output is also read by the stage's name)."""
        by_name = self._consumers.get(stage.name, 0) if len(stage.outputs) == 1 else 0
        return self._consumers.get(f"{stage.name}.{output}", 0) + by_name

    def unread_outputs(self, stage: Stage) -> frozenset[str]:
        """The outputs of ``stage`` that no stage and no sink reads."""
        return frozenset(o for o in stage.outputs if self.readers(stage, o) == 0)

    @property
    def stateful_stages(self) -> list[Stage]:
        return [s for s in self._order if s.keyed_state or s.operator_state]

    @property
    def tasks(self) -> list[str]:
        """Everything that acknowledges a checkpoint: every stage and every sink."""
        return [f"stage:{s.name}" for s in self._order] + [f"sink:{s.name}" for s in self.sinks]
