"""Parse a Dagster command line with the installed Dagster's own click commands (nothing runs)."""

from __future__ import annotations

PROGRAMS = ("dagster", "dagster-daemon", "dagster-webserver")
#: Commands that run a Dagster program with its own command line (orchestration/webserver.py).
WRAPPERS = {("python", "-m", "epochal.orchestration.webserver"): "dagster-webserver"}


def parse_dagster_command(args: list[str]) -> str:
    """Parse ``args`` (program first) down to its leaf command; return that command's name.

    Raises click's UsageError (or BadParameter) when the line would not parse.
    """
    from dagster._cli import cli as dagster_cli
    from dagster._daemon.cli import cli as daemon_cli
    from dagster_webserver.cli import cli as webserver_cli

    for prefix, wrapped in WRAPPERS.items():
        if tuple(args[:len(prefix)]) == prefix:
            args = [wrapped, *args[len(prefix):]]
    program, rest = args[0], args[1:]
    command = {"dagster": dagster_cli, "dagster-daemon": daemon_cli, "dagster-webserver": webserver_cli}[program]
    ctx = command.make_context(program, list(rest))
    while getattr(command, "commands", None) and (ctx.protected_args or ctx.args):
        name, sub, remaining = command.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
        command = sub
        ctx = sub.make_context(name, remaining, parent=ctx)
    assert not getattr(command, "commands", None), f"{args}: names a command group, not a command"
    return command.name
