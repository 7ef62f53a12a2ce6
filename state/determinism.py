"""What a re-run need not repeat: expressions in a DataFrame's plan whose values depend on chance, the wall
clock, the partitioning or the order rows arrive in.

``epochal verify`` compares results: two straight runs on one machine, over the same files, give the same
``monotonically_increasing_id()`` and the same unordered ``first()``, which differ on a cluster or after a
rescale. So verify also reads the plans of what each stage writes (its outputs and its state updates) and
names such expressions as warnings (:class:`PlanInspector`). Spark says which expressions are
non-deterministic (``Expression.deterministic``: ``rand()``, ``uuid()``, ``monotonically_increasing_id()``, a
UDF marked ``asNondeterministic()``); it calls ``first()``, ``current_timestamp()``, an unordered ``limit`` and
``sample()`` deterministic (within one query they are), which a re-run of an epoch is not. Not named:
``input_file_name()`` (an epoch's files are recorded, so its re-run reads the same ones) and
``collect_list()`` (its arrival order is usually sorted later, in another projection, which the plan does not
tie to it), ``dropDuplicates(subset)`` (any one row of each key: exact when duplicates are equal, as
re-delivered events are) and a window's ``row_number()`` over an order with ties. The plan is Spark's analyzed plan as JSON (``TreeNode.toJSON``, one call to the JVM): each tree is
a list of its nodes in pre-order, each node with its ``num-children``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_RANDOM = "random: another value on every run, and a seeded one another value at another parallelism"
_PARTITIONING = "depends on how the rows are split into partitions: another value at another parallelism or file layout"
_SPLITS = "depends on how the files are split (spark.sql.files.maxPartitionBytes): another value with other settings"
_CLOCK = ("the wall clock: a re-run of the epoch (after a crash, a restore, a backfill) sees another time; "
          "use ctx.info.window_start, window_end or clock")
_ORDER = "picks by the order rows arrive in, which a shuffle may change: order them (min_by, max_by) or sort the result"

#: Expression classes (Spark's simple names) and what they are called in PySpark.
EXPRESSIONS: dict[str, tuple[str, str]] = {
    "Rand": ("rand()", _RANDOM),
    "Randn": ("randn()", _RANDOM),
    "Uuid": ("uuid()", _RANDOM),
    "Shuffle": ("shuffle()", _RANDOM),
    "Uniform": ("uniform()", _RANDOM),
    "RandStr": ("randstr()", _RANDOM),
    "MonotonicallyIncreasingID": ("monotonically_increasing_id()", _PARTITIONING),
    "SparkPartitionID": ("spark_partition_id()", _PARTITIONING),
    "InputFileBlockStart": ("input_file_block_start()", _SPLITS),
    "InputFileBlockLength": ("input_file_block_length()", _SPLITS),
    "CurrentTimestamp": ("current_timestamp()", _CLOCK),
    "Now": ("now()", _CLOCK),
    "CurrentDate": ("current_date()", _CLOCK),
    "LocalTimestamp": ("localtimestamp()", _CLOCK),
    "CurrentTime": ("current_time()", _CLOCK),
    "First": ("first() without an order", _ORDER),
    "Last": ("last() without an order", _ORDER),
}
#: Plan nodes that keep "whichever rows come first" unless a Sort is beneath them (through these).
_LIMITS = {"GlobalLimit": "limit()", "Tail": "tail()", "Offset": "offset()"}
_KEEPS_ORDER = {"LocalLimit", "Project", "SubqueryAlias", "Filter", "ResolvedHint"}
_UDFS = {"PythonUDF", "ScalaUDF"}
#: The column epochal's own ``run_subtask_process`` assigns subtasks in (``spark_partition_id()`` after a
#: ``repartition``): Flink's subtasks, not the user's expression (probe 16: verify named it in the user's stage).
SUBTASK_COLUMN = "__subtask"


@dataclass(frozen=True)
class Finding:
    expression: str  # as PySpark calls it, e.g. "monotonically_increasing_id()"
    reason: str

    def __str__(self) -> str:
        return f"{self.expression}: {self.reason}"


def _simple(node: dict) -> str:
    return str(node.get("class", "")).rsplit(".", 1)[-1]


def _trees(value: Any) -> Iterator[list[dict]]:
    """Every flattened tree (a list of nodes in pre-order) in the JSON ``value``, nested ones included."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "class" in v for v in value):
            yield value
        for item in value:
            yield from _trees(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _trees(item)


def _unsorted_limit(tree: list[dict], i: int) -> bool:
    """Whether the limit at ``i`` takes rows of an unsorted child (single-child nodes follow it in pre-order)."""
    for node in tree[i + 1:]:
        name = _simple(node)
        if name == "Sort":
            return False
        if name not in _KEEPS_ORDER:
            return True
    return True


def findings_of_plan(plan: Any) -> list[Finding]:
    """The findings in an analyzed plan's JSON (parsed), each once, in the order they appear."""
    found: dict[Finding, None] = {}
    for tree in _trees(plan):
        for i, node in enumerate(tree):
            name = _simple(node)
            if name in EXPRESSIONS:
                if name == "SparkPartitionID" and i > 0 and _simple(tree[i - 1]) == "Alias" \
                        and tree[i - 1].get("name") == SUBTASK_COLUMN:
                    continue  # epochal's own subtasks (run_subtask_process)
                found[Finding(*EXPRESSIONS[name])] = None
            elif name in _LIMITS and _unsorted_limit(tree, i):
                found[Finding(f"{_LIMITS[name]} without orderBy()", "keeps whichever rows come first")] = None
            elif name == "Sample":
                found[Finding("sample()", "draws by a seed and the partitioning: other rows at another parallelism")] = None
            elif name in _UDFS and node.get("udfDeterministic") is False:
                udf = node.get("name") or node.get("udfName") or "a UDF"
                found[Finding(f"{udf} (asNondeterministic)", "a UDF marked non-deterministic")] = None
    return list(found)


def findings(df: DataFrame) -> list[Finding]:
    """The expressions of ``df``'s analyzed plan whose values a re-run need not repeat (empty if none or if
    Spark cannot write the plan as JSON)."""
    try:
        analyzed = df._jdf.queryExecution().analyzed()
        plan = json.loads(analyzed.toJSON())
    except Exception as exc:  # noqa: BLE001 - a plan Spark cannot render is not the user's error
        log.debug("could not read the plan as JSON: %s", exc)
        return []
    return findings_of_plan(plan)


@dataclass
class PlanInspector:
    """Collects :func:`findings` of each stage's outputs and state writes (each place read once).

    A stage's frames carry its inputs' plans: what an upstream stage introduced is named at that stage only
    (:meth:`enter` says which stage runs next and what it reads).
    """

    found: dict[tuple[str, str], list[Finding]] = field(default_factory=dict)
    _carried: dict[str, set[Finding]] = field(default_factory=dict)  # every finding in each output's plan
    _inherited: dict[str, set[Finding]] = field(default_factory=dict)  # per stage: what its inputs carry

    def enter(self, stage: str, inputs: Iterable[str]) -> None:
        """``stage`` runs next, reading ``inputs`` (``<stage>.<output>`` of stages seen before, or sources)."""
        self._inherited[stage] = set().union(*(self._carried.get(ref, ()) for ref in inputs))

    def see(self, stage: str, where: str, df: Any) -> None:
        if (stage, where) in self.found or not isinstance(df, DataFrame):
            return
        every = findings(df)
        if where.startswith("output "):
            self._carried[f"{stage}.{where.removeprefix('output ')}"] = set(every)
        inherited = self._inherited.get(stage, set())
        self.found[(stage, where)] = [f for f in every if f not in inherited]

    def sources(self) -> dict[str, list[str]]:
        """Per stage (in the order seen) whose own plans introduced a finding: those findings, each once."""
        by_stage: dict[str, list[str]] = {}
        for (stage, _), items in self.found.items():
            for f in items:
                if str(f) not in by_stage.setdefault(stage, []):
                    by_stage[stage].append(str(f))
        return {stage: items for stage, items in by_stage.items() if items}

    def warnings(self) -> list[str]:
        """One line per stage and place with findings: ``stage S, output O: expr: why; expr: why``."""
        return [f"stage {stage}, {where}: " + "; ".join(str(f) for f in items)
                for (stage, where), items in self.found.items() if items]
