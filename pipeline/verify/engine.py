"""``epochal verify`` (DESIGN sections 3 and 6): the exactly-once invariants, checked on the user's own pipeline.

The configured pipeline runs over a range of the user's input (``from_`` .. ``to``), each scenario in its own
folder under a temporary directory: the configuration is copied with ``warehouse`` and ``checkpoints.dir``
pointed there and ``partitions.start`` moved to ``from_`` (the state starts empty at ``from_``); ``landing``
stays the user's, only read. The user's warehouse and checkpoints are never touched.

Scenarios, each compared with the first straight run (:mod:`epochal.pipeline.verify.compare`):

- ``straight``: the reference; ``straight again``: a second straight run. If the two differ a stage is
  not deterministic (``rand()``, ``current_timestamp()``, an unordered ``limit``): that is named, and the
  other scenarios are skipped (their differences would mean nothing);
- ``restore checkpoint``: the second straight run restores its middle checkpoint and runs on;
- ``savepoint``: the second straight run took a savepoint at the middle on its way (a savepoint changes
  neither the state nor the sinks); it is restored with another parallelism, and the pipeline runs on
  (an operator state that differs then is a note, not a failure: kept per subtask, it is the stage's to
  rewrite at the new parallelism);
- ``crash <point>``: ``epochal run`` in its own process is SIGKILLed at a named crash point
  (:mod:`epochal.pipeline.faults`) in the middle epoch, then resumed here; ``in_restore`` kills the recovery
  of a crash, ``in_savepoint`` a savepoint. A point the run never reaches is reported ``not reached``;
- the plans of what the first straight run's stages write (outputs, keyed and operator state) are read for
  expressions a re-run need not repeat though these runs on one machine do (``monotonically_increasing_id()``,
  an unordered ``first()``, ``current_timestamp()``; :mod:`epochal.state.determinism`): warnings in the
  report, not failures (a ``first()`` over equal values is fine), each named at the stage that wrote it;
- ``random instant``: killed ``EPOCHAL_CRASH_AFTER_S`` seconds into its work, drawn per seed within the
  straight runs' duration (the faster), then resumed; when the killed process finishes first, drawn again
  within the time it took.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from epochal.config import Jit, Settings, dump_settings
from epochal.pipeline.errors import PipelineError
from epochal.pipeline.faults import CrashPoint
from epochal.pipeline.partitions import Partitioning
from epochal.pipeline.registry import build_pipeline
from epochal.pipeline.verify.compare import compare_deployments
from epochal.pipeline.verify.report import Outcome, ScenarioResult, VerifyReport
from epochal.state.determinism import PlanInspector

DEFAULT_PARTITIONS = 3
#: Draws of a random instant before it is reported ``not reached`` (each later one within the last run's time).
RANDOM_ATTEMPTS = 3
_clock = time.monotonic
SAVEPOINT_NAME = "verify"
KILLED = -signal.SIGKILL


class _Failed(Exception):
    """A run of a scenario failed (not by the SIGKILL it was asked for)."""


class Verifier:
    """Runs every scenario; :meth:`run` returns the :class:`VerifyReport`.

    ``cli`` is the command that starts ``epochal`` as its own process (the killed runs), e.g.
    ``[sys.executable, "-m", "epochal.orchestration.cli"]``; ``points`` restricts the named crash points
    (default: all); ``seeds`` is the number of random instants.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        cli: Sequence[str],
        from_: str | None = None,
        to: str | None = None,
        seeds: int = 2,
        points: Sequence[str] | None = None,
        workdir: str | Path | None = None,
        keep: bool = False,
        progress: Callable[[str], None] | None = None,
        spark=None,
        child_timeout_s: float = 1800,
    ) -> None:
        self.settings = settings
        self.cli = list(cli)
        self.seeds = seeds
        self.points = [CrashPoint(p) for p in (points if points is not None else [p.value for p in CrashPoint])]
        self.keep = keep
        self.progress = progress or (lambda line: None)
        self.child_timeout_s = child_timeout_s
        user = Partitioning.from_settings(settings.partitions)
        self.first, self.last = _range(user, from_, to)
        self.n = self.last - self.first + 1
        self.start = user.info(self.first).window_start
        self.partitioning = Partitioning(self.start, user.granularity)
        self.from_key, self.to_key = self.partitioning.key(0), self.partitioning.key(self.n - 1)
        self.clock = self.partitioning.info(self.n - 1).clock
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="epochal-verify-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        #: The pipeline's (it fixes the key groups; a configured one must equal it): the rescale stays within it.
        self.max_parallelism = build_pipeline(settings).max_parallelism
        self._spark = spark
        self._reference = None
        self._again = None
        self._savepoint_taken: dict | None = None
        self._epochs_s = 0.0
        self._children = 0
        #: Reads the plans of the first straight run's outputs and state writes (warnings, not failures).
        self.inspector = PlanInspector()

    # -- the scenarios ------------------------------------------------------------------------

    def run(self) -> VerifyReport:
        report = VerifyReport(self.settings.pipeline, self.from_key, self.to_key, self.n, str(self.workdir), self.keep)
        plan = self._plan()
        try:
            for i, (name, kind, scenario) in enumerate(plan, 1):
                if report.non_deterministic:
                    report.scenarios.append(ScenarioResult(name, kind, Outcome.SKIPPED, detail="the pipeline is not deterministic"))
                    continue
                self.progress(f"verify [{i}/{len(plan)}] {name} ...")
                started = time.monotonic()
                try:
                    result = scenario()
                except _Failed as exc:
                    result = ScenarioResult(name, kind, Outcome.FAILED, detail=str(exc))
                except Exception as exc:  # noqa: BLE001 - a run that raises is a finding, named in the report
                    result = ScenarioResult(name, kind, Outcome.FAILED, detail=f"{type(exc).__name__}: {_first_line(exc)}")
                result.name, result.kind = name, kind
                result.duration_s = time.monotonic() - started
                report.scenarios.append(result)
                self.progress(f"verify [{i}/{len(plan)}] {name}: {result.outcome.value} ({result.duration_s:.0f}s)"
                              + ("" if result.passed else f" - {result.summary()}"))
                if i == 1 and result.outcome is not Outcome.REFERENCE:
                    for rest_name, rest_kind, _ in plan[1:]:
                        report.scenarios.append(ScenarioResult(rest_name, rest_kind, Outcome.SKIPPED, detail="no straight run"))
                    break
        finally:
            report.warnings, report.sources = self.inspector.warnings(), self.inspector.sources()
            if not self.keep:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return report

    def _plan(self) -> list[tuple[str, str, Callable[[], ScenarioResult]]]:
        crash_epoch = min(self.n - 1, max(1, (self.n - 1) // 2))
        plan = [
            ("straight", "straight", self._straight),
            ("straight again (determinism)", "straight", self._straight_again),
            ("restore middle checkpoint", "restore", self._restore_checkpoint),
            ("savepoint, restore with parallelism " + str(self._other_parallelism() or "-"), "savepoint", self._savepoint),
        ]
        for point in self.points:
            where = "" if point in (CrashPoint.IN_RESTORE, CrashPoint.IN_SAVEPOINT) else f" (epoch {crash_epoch})"
            plan.append((f"crash {point.value}{where}", "crash", lambda p=point: self._crash(p, crash_epoch)))
        for seed in range(self.seeds):
            plan.append((f"random instant (seed {seed})", "random", lambda s=seed: self._random(s)))
        return plan

    def _straight(self) -> ScenarioResult:
        runner = self._runner("straight")
        runner.d.inspect_plans(self.inspector)
        report = runner.run(to=self.to_key)
        self._epochs_s = sum(e.duration_s for e in report.epochs)
        self._reference = runner.d
        return ScenarioResult("", "", Outcome.REFERENCE, detail=f"{len(report.epochs)} epochs in {self._epochs_s:.1f}s")

    def _straight_again(self) -> ScenarioResult:
        """The second straight run, with a savepoint taken at the middle on the way (a savepoint only reads)."""
        self._again = runner = self._runner("straight-again")
        middle = (self.n - 1) // 2
        report = runner.run(to=self.partitioning.key(middle))
        self._savepoint_taken = runner.savepoint(SAVEPOINT_NAME)
        report.epochs += runner.run(to=self.to_key).epochs
        # The random instants fall within the faster of the two (the first one warms the JVM up).
        self._epochs_s = min(self._epochs_s, sum(e.duration_s for e in report.epochs))
        diffs = compare_deployments(self._session(), self._reference, runner.d, clock=self.clock)
        return ScenarioResult("", "", Outcome.NON_DETERMINISTIC if diffs else Outcome.MATCH, diffs)

    def _restore_checkpoint(self) -> ScenarioResult:
        runner = self._again
        if runner is None:
            raise _Failed("the second straight run failed")
        middle = (self.n - 1) // 2
        candidates = [c for c in runner.d.coordinator.store.all() if not c.is_savepoint and int(c.metadata.epoch) < self.n - 1]
        if not candidates:
            return ScenarioResult("", "", Outcome.SKIPPED, detail="no checkpoint before the last epoch (more partitions, or a smaller checkpoints.interval_epochs)")
        chosen = min(candidates, key=lambda c: (abs(int(c.metadata.epoch) - middle), -int(c.metadata.epoch)))
        runner.restore(int(chosen.checkpoint_id))
        runner.run(to=self.to_key)
        result = self._compare(runner)
        result.detail = f"checkpoint {int(chosen.checkpoint_id)} (epoch {int(chosen.metadata.epoch)})"
        return result

    def _other_parallelism(self) -> int | None:
        p = self.settings.spark.parallelism
        max_p = self.max_parallelism
        return p + 1 if p + 1 <= max_p else (p - 1 if p > 1 else None)

    def _savepoint(self) -> ScenarioResult:
        """The second straight run's middle savepoint, restored with another parallelism, run on."""
        if self.n < 2:
            return ScenarioResult("", "", Outcome.SKIPPED, detail="needs at least 2 partitions")
        if self._savepoint_taken is None:
            raise _Failed("the second straight run failed")
        other = self._other_parallelism()
        rescaled = self._runner("straight-again", parallelism=other)
        rescaled.restore(self._savepoint_taken["path"], parallelism=other)
        rescaled.run(to=self.to_key)
        result = self._compare(rescaled, rescaled=other is not None)
        result.detail = (f"savepoint at epoch {self._savepoint_taken['epoch']}, "
                         f"parallelism {self.settings.spark.parallelism} -> {other}")
        per_subtask = [d for d in result.diffs if d.kind == "operator"] if other is not None else []
        if per_subtask:  # rewritten by its stage at the new parallelism: told, not failed
            result.diffs = [d for d in result.diffs if d not in per_subtask]
            result.outcome = Outcome.DIFFERS if result.diffs else Outcome.MATCH
            result.note = ("operator state differs after the rescale, as a stage that keeps it per subtask "
                           "rewrites it at the new parallelism (not a failure; sinks and keyed state compared): "
                           + "; ".join(d.describe() for d in per_subtask))
        return result

    def _crash(self, point: CrashPoint, epoch: int) -> ScenarioResult:
        name = f"crash-{point.value}"
        config = self._deploy(name)
        stages = len(self._reference.pipeline.ordered_stages)
        sinks = max(1, len(self._reference.sinks))
        if point is CrashPoint.IN_SAVEPOINT:
            self._runner(name).run(to=self.partitioning.key(epoch))
            crash_at = f"{point.value}@{stages}"
            if not self._killed(config, ["savepoint", "--name", SAVEPOINT_NAME], crash_at=crash_at):
                return ScenarioResult("", "", Outcome.NOT_REACHED, crash=crash_at, detail="the savepoint finished")
            runner = self._runner(name)
            runner.savepoint(SAVEPOINT_NAME)  # the name the killed savepoint left behind
        else:
            first = f"in_stage:{epoch}@{stages}" if point is CrashPoint.IN_RESTORE else _crash_at(point, epoch, stages, sinks)
            if not self._killed(config, ["run", "--to", self.to_key], crash_at=first):
                return ScenarioResult("", "", Outcome.NOT_REACHED, crash=first, detail="the run finished")
            crash_at = first
            if point is CrashPoint.IN_RESTORE:  # the restart's recovery (a restore) is killed in turn
                crash_at = point.value
                if not self._killed(config, ["run", "--to", self.to_key], crash_at=crash_at):
                    return ScenarioResult("", "", Outcome.NOT_REACHED, crash=crash_at, detail="the restart did not restore")
            runner = self._runner(name)
        runner.run(to=self.to_key)
        result = self._compare(runner)
        result.crash = crash_at
        return result

    def _random(self, seed: int) -> ScenarioResult:
        """Killed at an instant drawn from the seed within the straight runs' duration; when the run ends first (a
        fresh process can be faster than the runs here), drawn again within what it took, up to
        :data:`RANDOM_ATTEMPTS` times."""
        rng, bound = random.Random(seed), max(self._epochs_s, 0.1)
        for attempt in range(RANDOM_ATTEMPTS):
            name = f"random-{seed}" if attempt == 0 else f"random-{seed}-{attempt}"
            after_s = round(rng.uniform(0.05, bound), 3)
            started = _clock()
            if self._killed(self._deploy(name), ["run", "--to", self.to_key], after_s=after_s):
                break
            bound = max(0.9 * min(after_s, _clock() - started), 0.1)  # its work ended before after_s
        else:
            return ScenarioResult("", "", Outcome.NOT_REACHED, crash=f"EPOCHAL_CRASH_AFTER_S={after_s}",
                                  detail=f"the run finished before each of {RANDOM_ATTEMPTS} instants (the last {after_s}s)")
        runner = self._runner(name)
        runner.run(to=self.to_key)
        result = self._compare(runner)
        result.crash = f"EPOCHAL_CRASH_AFTER_S={after_s}" + (f" (draw {attempt + 1})" if attempt else "")
        return result

    # -- deployments and processes ------------------------------------------------------------

    def scenario_settings(self, name: str, *, parallelism: int | None = None) -> Settings:
        """The settings of scenario ``name``: storage under the work folder, partitions from ``from_``."""
        s, root = self.settings, self.workdir / name
        checkpoints = s.checkpoints.model_copy(update={
            "dir": str(root / "checkpoints"), "savepoints_dir": None, "retain": max(s.checkpoints.retain, self.n + 2),
        })
        spark = s.spark if parallelism is None else s.spark.model_copy(update={"parallelism": parallelism})
        return s.model_copy(update={
            "warehouse": str(root / "warehouse"), "checkpoints": checkpoints, "spark": spark,
            "partitions": s.partitions.model_copy(update={"start": self.start}),
        })

    def _deploy(self, name: str) -> Path:
        """Write scenario ``name``'s configuration file (for the ``epochal`` processes).

        Of a verify over the default few partitions, a process that is killed runs an epoch or two in
        a fresh JVM: with ``spark.jit: auto`` (the default) it is started with the quick compiler, which ends such a
        process sooner (``spark.jit``). Longer ranges, and an explicit choice, keep the configured one.
        """
        settings = self.scenario_settings(name)
        if settings.spark.jit is Jit.AUTO and self.n <= DEFAULT_PARTITIONS:
            settings = settings.model_copy(update={"spark": settings.spark.model_copy(update={"jit": Jit.QUICK})})
        path = self.workdir / name / "epochal.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_settings(settings))
        return path

    def _session(self):
        if self._spark is None:
            from epochal.state.session import build_spark_session

            locations = self.scenario_settings("x").storage_locations()
            self._spark = build_spark_session(self.settings.spark, locations=locations)
        return self._spark

    def _runner(self, name: str, *, parallelism: int | None = None):
        from epochal.pipeline.registry import build_deployment
        from epochal.pipeline.runner import EpochRunner

        return EpochRunner(build_deployment(self.scenario_settings(name, parallelism=parallelism), self._session()))

    def _compare(self, runner, *, rescaled: bool = False) -> ScenarioResult:
        diffs = compare_deployments(self._session(), self._reference, runner.d, clock=self.clock, rescaled=rescaled)
        return ScenarioResult("", "", Outcome.DIFFERS if diffs else Outcome.MATCH, diffs)

    def _killed(self, config: Path, args: list[str], *, crash_at: str | None = None, after_s: float | None = None) -> bool:
        """Run ``epochal ARGS`` in its own process, asked to die; True if SIGKILLed, False if it finished."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("EPOCHAL_CRASH", "EPOCHAL__")) and k != "EPOCHAL_CONFIG"}  # the file says it all
        if crash_at:
            env["EPOCHAL_CRASH_AT"] = crash_at
        if after_s is not None:
            env["EPOCHAL_CRASH_AFTER_S"] = str(after_s)
        command = [*self.cli, *args, "--config", str(config), "--json"]
        self._children += 1
        log = config.parent / f"process-{self._children}.log"
        with open(log, "w") as out:
            done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=self.child_timeout_s)
        if done.returncode == KILLED:
            return True
        if done.returncode == 0:
            return False
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        raise _Failed(f"`epochal {' '.join(args)}` exited {done.returncode}: {lines[-1] if lines else 'no output'}")


def _crash_at(point: CrashPoint, epoch: int, stages: int, sinks: int) -> str:
    """``EPOCHAL_CRASH_AT`` for ``point`` in ``epoch``: at the last stage or sink, when hit once per each."""
    if point in (CrashPoint.IN_STAGE, CrashPoint.AFTER_STATE_WRITE):
        return f"{point.value}:{epoch}@{stages}"
    if point is CrashPoint.IN_SINK:
        return f"{point.value}:{epoch}@{sinks}"
    return f"{point.value}:{epoch}"


def _range(partitioning: Partitioning, from_: str | None, to: str | None) -> tuple[int, int]:
    """The epochs (of the user's numbering) ``from_`` .. ``to``; a few partitions when not given."""
    first = partitioning.epoch(from_) if from_ else None
    last = partitioning.epoch(to) if to else None
    if first is None:
        first = 0 if last is None else max(0, last - DEFAULT_PARTITIONS + 1)
    if last is None:
        last = first + DEFAULT_PARTITIONS - 1
    if last < first:
        raise PipelineError(f"--to {partitioning.key(last)} is before --from {partitioning.key(first)}")
    return first, last


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
