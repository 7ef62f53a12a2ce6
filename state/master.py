"""The Spark master a driver connects to, reached before its JVM starts."""

from __future__ import annotations

import socket

from epochal.state.errors import SparkStartError


def check_master_reachable(master: str, timeout_s: float = 10.0) -> None:
    """Raise :class:`SparkStartError` if no master of a standalone ``spark://host:port[,host:port]`` URL accepts a
    connection: before the JVM starts, instead of Spark's retries for a minute ending in "Cannot call methods on a
    stopped SparkContext". Other masters (local, yarn, k8s) are Spark's to reach."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            problems.append(f"{address.strip()}: {exc}")
    raise SparkStartError(master, ConnectionError("no master accepts a connection (" + "; ".join(problems) + ")"))
