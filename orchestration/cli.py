"""The ``epochal`` command line (DESIGN section 6).

Every command takes ``--config PATH`` and ``--json`` (one JSON document on
stdout; logs on stderr). Exit status 0 on success, non-zero with a one-line
reason on stderr otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from typing import Any, Callable, Sequence

from epochal.errors import EpochalError
from epochal.orchestration import console
from epochal.state.errors import RestoreFallbackWarning

log = logging.getLogger("epochal")


class _UsageError(Exception):
    """A usage error argparse found, raised out of the (sub)parser that found it to the root's ``parse_args``."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.message, self.prog = " ".join(message.split()), prog


class _Parser(argparse.ArgumentParser):
    """Usage errors fail like every other failure: one line on stderr (with the command whose ``--help`` to
    read), and with ``--json`` the failure document on stdout; exit status 2. Subparsers are of this class too
    (``add_subparsers`` makes them with ``type(self)``)."""

    def error(self, message: str):  # type: ignore[override]
        raise _UsageError(message, self.prog)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        try:
            return super().parse_args(argv, namespace)
        except _UsageError as exc:
            prog = exc.prog if exc.prog != self.prog else _named_command(self, argv)
            _fail(exc.message, "UsageError", _wants_json(argv), hint=f" (see {prog} --help)")
            raise SystemExit(2) from None


def _named_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The deepest command ``argv`` names (``epochal run`` for ``run --bogus``): whose ``--help`` to read."""
    for word in argv:
        choices = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if choices is None:
            break
        parser = choices.get(word, parser)
    return parser.prog


def _wants_json(argv: Sequence[str]) -> bool:
    """``--json`` (or an abbreviation argparse accepts) among the arguments, even ones that did not parse."""
    return any(word == "--json" or (len(word) > 3 and "--json".startswith(word)) for word in argv)


def _fail(reason: str, error_type: str, as_json: bool, hint: str = "", done: dict | None = None) -> None:
    """A failure: one line on stderr; with ``--json`` also the failure document on stdout. ``done``: what the
    command finished first (a run's epochs), its table on stdout, or its keys in the JSON document."""
    if done is not None and not as_json:
        print(console.run(done))
        sys.stdout.flush()
    print(f"epochal: error: {reason}{hint}", file=sys.stderr)
    if as_json:  # --json: stdout is one JSON document, a failure's too
        print(json.dumps({**(done or {}), "ok": False, "error": reason, "error_type": error_type}, default=str))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="YAML configuration file")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON document on stdout")


def _savepoint_name(text: str) -> str:
    """Refuse a savepoint name that could leave the savepoints folder, before Spark starts."""
    from epochal.state.errors import InvalidSavepointName
    from epochal.state.checkpoint.storage import validate_name

    try:
        return validate_name(text)
    except InvalidSavepointName as exc:
        raise argparse.ArgumentTypeError(exc.message) from exc


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def _points(text: str) -> list[str]:
    """Crash point names, checked before Spark starts."""
    from epochal.pipeline.faults import POINTS

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in POINTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown crash point(s) {unknown}; known: {', '.join(POINTS)}")
    return names


def _verify_parser(sub) -> argparse.ArgumentParser:
    verify = sub.add_parser(
        "verify", help="check exactly-once on the configured pipeline: crashes, restores and a rescale against a straight run",
    )
    verify.add_argument("--from", dest="from_", metavar="KEY", help="first partition (default: partitions.start)")
    verify.add_argument("--to", metavar="KEY", help="last partition (default: 2 after --from)")
    verify.add_argument("--seeds", type=_non_negative, default=2, help="random crash instants (default 2)")
    verify.add_argument("--points", type=_points, default=None, help="named crash points, comma-separated (default: all; '' for none)")
    verify.add_argument("--workdir", default=None, help="where the scenarios' storage goes (default: a temporary folder)")
    verify.add_argument("--keep", action="store_true", help="keep the scenarios' storage and the killed processes' logs")
    return verify


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="epochal", description="Checkpointed, stateful batch-incremental pipelines on Spark and Delta",
    )
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="make sample data and run the example end to end")
    demo.add_argument("--dir", default=None, help="folder for the demo's data (default: a temporary folder)")
    demo.add_argument("--hours", type=int, default=4, help="hours of sample data")

    run = sub.add_parser("run", help="run epochs in order")
    run.add_argument("--to", metavar="KEY", help="last partition (default: the latest closed window)")
    run.add_argument("--from", dest="from_", metavar="KEY",
                     help="a backfill from this partition: state and sinks go back to the checkpoint before it, then replay")
    run.add_argument("--partition", metavar="KEY",
                     help="--from KEY --to KEY: a backfill of one partition (the partitions after it are replayed by the next run)")

    checkpoints = _checkpoints_parser(sub)

    savepoint = sub.add_parser("savepoint", help="take a savepoint; prints its path")
    savepoint.add_argument("--name", type=_savepoint_name, help="one path segment: letters, digits, '_', '-', '.'")

    restore = sub.add_parser("restore", help="restore a checkpoint (latest by default) or a savepoint")
    group = restore.add_mutually_exclusive_group()
    group.add_argument("--checkpoint", metavar="ID")
    group.add_argument("--savepoint", metavar="PATH")
    restore.add_argument("--parallelism", type=int)
    restore.add_argument(
        "--allow-non-restored-state", action="store_true",
        help="drop state the checkpoint holds that no stage declares any more (Flink's allowNonRestoredState)",
    )

    state = sub.add_parser("state", help="read state tables (State Processor API)")
    ssub = state.add_subparsers(dest="action", required=True)
    read = ssub.add_parser("read")
    read.add_argument("stage")
    read.add_argument("state")
    read.add_argument("--checkpoint", metavar="ID")
    read.add_argument("--limit", type=_positive, default=None, help="at most this many rows (>= 1)")
    _common(read)

    new = sub.add_parser("new", help="write a starter pipeline package (a stage with keyed state, a config, a test)")
    new.add_argument("name", help="the package name (a Python identifier)")
    new.add_argument("--dir", default=None, help="where to write it (default: ./NAME)")

    verify = _verify_parser(sub)

    sub.add_parser("ui", help="run dagster dev (webserver, daemon) on the definitions")
    for p in (demo, run, checkpoints, savepoint, restore, state, new, verify, sub.choices["ui"]):
        _common(p)
    return parser


def _checkpoints_parser(sub) -> argparse.ArgumentParser:
    checkpoints = sub.add_parser("checkpoints", help="list or inspect checkpoints and savepoints")
    csub = checkpoints.add_subparsers(dest="action", required=True)
    _common(csub.add_parser("list", help="the retained checkpoints and savepoints, oldest first (no JVM)"))
    inspect = csub.add_parser("inspect", help="one checkpoint or savepoint: its state handles and source positions (no JVM)")
    inspect.add_argument("id", help="a checkpoint id (7 or chk-7), a savepoint name or path")
    _common(inspect)
    _common(csub.add_parser(
        "reset-failures", help="clear a failed pipeline's checkpoint failures (after fixing their cause); prints what was cleared",
    ))
    return checkpoints


class CliError(EpochalError):
    """A user-facing failure: one line on stderr, exit 1."""


def _settings(args):
    from epochal.config import load_settings

    return load_settings(getattr(args, "config", None) or os.environ.get("EPOCHAL_CONFIG"))


def _runner(settings, *, lazy: bool = False):
    from epochal.pipeline.registry import build_deployment
    from epochal.pipeline.runner import EpochRunner

    deployment = build_deployment(settings, lazy=lazy)
    return EpochRunner(deployment, on_epoch=_progress_printer())


def _progress_printer() -> Callable | None:
    if not sys.stderr.isatty():
        return None

    def show(report) -> None:
        status = report.checkpoint_status if report.checkpoint_id else "-"
        print(f"\r  epoch {report.epoch} {report.partition}  {report.duration_s:.1f}s  checkpoint {status}   ", end="", file=sys.stderr, flush=True)

    return show


def cmd_run(args) -> Any:
    from epochal.pipeline.errors import PipelineFailedError

    runner = _runner(_settings(args), lazy=True)  # Spark starts once the run knows its length (spark.jit: auto)
    if args.partition and (args.to or args.from_):
        raise CliError("--partition cannot be combined with --from/--to")
    frm, to = (args.partition, args.partition) if args.partition else (args.from_, args.to)
    before = runner.d.progress.load().last_done_epoch if frm else None
    try:
        report = runner.run(to=to, from_=frm)
        _say_rewound(runner, before)
    except PipelineFailedError as exc:  # the epochs done are reported, then a non-zero exit naming the failure
        if exc.report is None:
            raise
        failed = {"epoch": exc.epoch, "partition": exc.partition, "reason": exc.reason, "action": exc.action}
        document = {**exc.report.to_dict(), "failed": failed}
        return Finished(document, console.run(document), 1, f"{exc.message} ({exc.action})", "run")
    finally:
        if sys.stderr.isatty():
            print(file=sys.stderr)
    return report.to_dict()


def _say_rewound(runner, before: int | None) -> None:
    """After a backfill that ended before where the deployment was: say so on stderr (the state and the sinks
    are at the backfill's end; the partitions after it are replayed by the next run)."""
    after = runner.d.progress.load().last_done_epoch
    if before is not None and after is not None and after < before:
        key = runner.d.partitioning.key
        print(f"epochal: backfill done: state and sinks are at {key(after)}; the partitions after it, up to "
              f"{key(before)}, were rewound and are replayed by the next `epochal run`", file=sys.stderr)


def cmd_checkpoints(args) -> Any:
    from epochal.orchestration.checkpoint_commands import checkpoints

    return checkpoints(_settings(args), args.action, getattr(args, "id", None))


def cmd_savepoint(args) -> Any:
    return _runner(_settings(args), lazy=True).savepoint(args.name)  # Spark starts only if a restore or a large copy needs it


def cmd_restore(args) -> Any:
    if args.checkpoint is not None and not _reads_as_checkpoint(args.checkpoint):
        raise CliError(
            f"--checkpoint {args.checkpoint!r} is not a checkpoint id: give an id or chk-<id> "
            "(see `epochal checkpoints list`), or --savepoint PATH for a savepoint"
        )
    if args.savepoint is not None and _reads_as_checkpoint(args.savepoint):
        raise CliError(
            f"--savepoint {args.savepoint!r} names a checkpoint, not a savepoint: "
            f"use --checkpoint {args.savepoint.removeprefix('chk-')} (see `epochal checkpoints list`)"
        )
    # Spark starts only if the restore needs it (a savepoint's copies, a table Delta must restore itself,
    # a sink rewound by content): a checkpoint's state and sinks come back by commits written from the log.
    runner = _runner(_settings(args), lazy=True)
    # --checkpoint chk-<id> is the id (the pointer "chk-3" alone would be looked up as a folder, named a savepoint).
    pointer = args.savepoint or (args.checkpoint and args.checkpoint.strip().rstrip("/").removeprefix("chk-"))
    restored = runner.restore(pointer, parallelism=args.parallelism, allow_non_restored_state=args.allow_non_restored_state)
    return restored.to_dict()


def _reads_as_checkpoint(text: str) -> bool:
    """A bare id or ``chk-<id>``: what ``--checkpoint`` takes (a path to a chk- folder is fine for --savepoint)."""
    text = text.strip().rstrip("/")
    return text.isdigit() or (text.startswith("chk-") and text[4:].isdigit())


def cmd_state(args) -> Any:
    """The rows of a state table (:func:`epochal.orchestration.state_read.read_state`)."""
    from epochal.orchestration.state_read import read_state

    return read_state(_runner(_settings(args), lazy=True).d, args.stage, args.state, args.checkpoint, args.limit)


def cmd_demo(args) -> Any:
    from epochal.orchestration.demo import run_demo

    return run_demo(args.dir, hours=args.hours)


def cmd_new(args) -> Any:
    from epochal.orchestration.scaffold import scaffold

    return scaffold(args.name, args.dir)


class Finished:
    """A command's result that prints itself and chooses its exit status (``epochal verify``, a failed run)."""

    def __init__(self, document: Any, text: str, exit_code: int, reason: str | None = None, verb: str = "verify") -> None:
        self.document, self.text, self.exit_code, self.reason, self.verb = document, text, exit_code, reason, verb


def cmd_verify(args) -> Any:
    from epochal.pipeline.verify.engine import Verifier

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    verifier = Verifier(
        _settings(args), cli=[sys.executable, "-m", "epochal.orchestration.cli"], from_=args.from_, to=args.to,
        seeds=args.seeds, points=args.points, workdir=args.workdir, keep=args.keep, progress=progress,
    )
    report = verifier.run()
    return Finished(report.to_dict(), report.table(), 0 if report.ok else 1, None if report.ok else report.reason())


def cmd_ui(args) -> Any:
    from epochal.orchestration.ui import serve

    return serve(getattr(args, "config", None) or os.environ.get("EPOCHAL_CONFIG"))


COMMANDS = {
    "run": cmd_run,
    "checkpoints": cmd_checkpoints,
    "savepoint": cmd_savepoint,
    "restore": cmd_restore,
    "state": cmd_state,
    "demo": cmd_demo,
    "new": cmd_new,
    "verify": cmd_verify,
    "ui": cmd_ui,
}


def _print(result: Any, as_json: bool, command: str) -> None:
    """One JSON document with ``--json``; else the command's text view (:mod:`console`), a path, or JSON."""
    if as_json:
        json.dump(result, sys.stdout, default=str)
        sys.stdout.write("\n")
        return
    text = console.render(command, result)
    if text is not None:
        print(text)
    elif isinstance(result, dict) and "path" in result and len(result) <= 6:
        print(result["path"])
    else:
        print(json.dumps(result, default=str, indent=2))


def _command(args) -> str:
    """The command as :data:`console.VIEWS` names it: ``run``, ``checkpoints list``..."""
    action = getattr(args, "action", None)
    return f"{args.command} {action}" if args.command == "checkpoints" and action else args.command


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=os.environ.get("EPOCHAL_LOG_LEVEL", "WARNING"), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    # A skipped checkpoint is logged as a WARNING line; Python's own copy of it would add a line of epochal's source.
    warnings.filterwarnings("ignore", category=RestoreFallbackWarning)
    as_json = bool(getattr(args, "json", False))
    try:
        result = COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("epochal: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for the user, the trace in debug logs
        log.debug("failure", exc_info=True)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        finished = getattr(exc, "run_report", None)
        _fail(first, type(exc).__name__, as_json, done=finished.to_dict() if finished and finished.epochs else None)
        return 1
    try:
        return _output(result, as_json, _command(args))
    except BrokenPipeError:  # `epochal checkpoints list | head`: the reader left; no traceback (Python's advice)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _output(result: Any, as_json: bool, command: str) -> int:
    if isinstance(result, Finished):
        if as_json:
            _print(result.document, True, command)
        else:
            print(result.text)
        sys.stdout.flush()
        if result.reason:
            print(f"epochal: {result.verb} failed: {result.reason}", file=sys.stderr)
        return result.exit_code
    _print(result, as_json, command)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
