"""The deployment files, continued: health checks of the containers, the README's snippets of deploy/,
and the Docker build context (static checks, no Docker engine; see tests/deployment/test_deployment_files.py)."""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.deployment.test_deployment_files import (
    DEPLOY, LONG_RUNNING, ONE_SHOT, ON_DEMAND, ROOT, S3_INIT, S3_PORT, S3_SERVICE, argv, compose, mounts, option, service_env,
)


# ----------------------------------------------------------------------------- health checks


def test_postgres_is_healthy_only_when_it_accepts_tcp_connections():
    services = compose()["services"]
    kind, script = services["postgres"]["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    args = shlex.split(script)
    assert args[0] == "pg_isready"
    # The image's entrypoint initialises a new data folder with a temporary server on the
    # Unix socket only (listen_addresses=''): a check over the socket passes against it.
    assert option(args, "-h", "--host") == "127.0.0.1", "over TCP, not the Unix socket"
    storage = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())["storage"]["postgres"]["postgres_db"]
    assert int(option(args, "-p", "--port")) == storage["port"] == 5432
    assert option(args, "-U", "--username") == '$POSTGRES_USER' and option(args, "-d", "--dbname") == '$POSTGRES_DB'
    assert {"POSTGRES_USER", "POSTGRES_DB"} <= set(service_env(services["postgres"]))


#: What a Spark 4 master's http://HOST:8080/json/ answers (org.apache.spark.deploy.JsonProtocol), cut down.
def _master_state(*workers: tuple[str, str]) -> dict[str, Any]:
    return {
        "url": "spark://spark-master:7077",
        "workers": [
            {"id": f"worker-20261101000000-{host}-40000", "host": host, "port": 40000,
             "webuiaddress": f"http://{host}:8081", "cores": 2, "coresused": 0, "coresfree": 2,
             "memory": 2048, "memoryused": 0, "memoryfree": 2048, "state": state, "lastheartbeat": 1793491200000}
            for host, state in workers
        ],
        "aliveworkers": sum(state == "ALIVE" for _, state in workers),
        "cores": 2, "coresused": 0, "memory": 2048, "memoryused": 0,
        "activeapps": [], "completedapps": [], "activedrivers": [], "completeddrivers": [], "status": "ALIVE",
    }


def _run_python_check(service: dict[str, Any], monkeypatch, answer: dict[str, Any] | Exception) -> list[str]:
    """Run a ``python -c`` health check in this process, urlopen answering ``answer``; the URLs asked."""
    import urllib.request

    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], "python is in the image (python:3.12), curl is not"
    assert not re.search(r"\bassert\b", test[3]), "python -O would skip an assert: exit with a status"
    asked: list[str] = []

    def urlopen(url, timeout=None):
        asked.append(url)
        assert timeout is not None and timeout < int(service["healthcheck"]["timeout"].rstrip("s"))
        if isinstance(answer, Exception):
            raise answer
        return io.BytesIO(json.dumps(answer).encode())

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    try:
        exec(compile(test[3], "healthcheck", "exec"), {"__name__": "__main__"})  # noqa: S102 - the compose file's own check
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise AssertionError(f"unhealthy: {exc.code}") from exc
    return asked


def test_spark_worker_is_healthy_only_once_registered_with_the_master(monkeypatch):
    import urllib.error

    services = compose()["services"]
    worker, master = services["spark-worker"], services["spark-master"]
    host = option(argv(worker), "--host")
    asked = _run_python_check(worker, monkeypatch, _master_state((host, "ALIVE")))
    url = urlparse(asked[0])
    assert url.hostname == "spark-master" and url.port == int(option(argv(master), "--webui-port")), asked
    assert url.path == "/json/"
    _run_python_check(worker, monkeypatch, _master_state((host, "DEAD"), (host, "ALIVE")))  # re-registered
    not_registered = {
        "no worker yet": _master_state(),
        "only another worker": _master_state(("other-worker", "ALIVE")),
        "lost": _master_state((host, "DEAD")),
        "master not answering": urllib.error.URLError("connection refused"),
    }
    for what, answer in not_registered.items():
        with pytest.raises((AssertionError, OSError)):
            _run_python_check(worker, monkeypatch, answer)
            pytest.fail(f"healthy while {what}")
    master_asked = _run_python_check(master, monkeypatch, _master_state())
    assert urlparse(master_asked[0]).port == int(option(argv(master), "--webui-port"))


def _worker_opts() -> dict[str, str]:
    opts = shlex.split(service_env(compose()["services"]["spark-worker"])["SPARK_WORKER_OPTS"])
    assert all(o.startswith("-D") and "=" in o for o in opts), opts
    return dict(o[2:].split("=", 1) for o in opts)


def test_spark_worker_cleans_up_finished_applications():
    opts = _worker_opts()
    assert opts["spark.worker.cleanup.enabled"] == "true"
    interval, ttl = int(opts["spark.worker.cleanup.interval"]), int(opts["spark.worker.cleanup.appDataTtl"])
    assert 60 <= interval <= ttl <= 7 * 24 * 3600
    work_dir = option(argv(compose()["services"]["spark-worker"]), "--work-dir")
    assert mounts(compose()["services"]["spark-worker"])[work_dir] == "spark-work", "what it cleans is a volume"


def test_spark_class_passes_the_worker_options_to_the_worker_jvm():
    """spark-class builds the Worker's JVM command with Spark's launcher: SPARK_WORKER_OPTS is in it."""
    import pyspark

    java = shutil.which("java", path=f"{os.environ.get('JAVA_HOME', '')}/bin") or shutil.which("java")
    if java is None:
        pytest.skip("no java here")
    home = Path(pyspark.__file__).parent
    worker = compose()["services"]["spark-worker"]
    args = argv(worker)
    assert args[0] == "spark-class" and (home / "bin" / "spark-class").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    # what bin/spark-class and bin/load-spark-env.sh set before they run the launcher
    env |= {"SPARK_HOME": str(home), "SPARK_SCALA_VERSION": "2.13", **service_env(worker)}
    out = subprocess.run(
        [java, "-Xmx64m", "-cp", str(home / "jars" / "*"), "org.apache.spark.launcher.Main", *args[1:]],
        env=env, capture_output=True, check=True, timeout=120,
    ).stdout.decode()
    command = [part for part in out.split("\0") if part.strip()]
    main = command.index("org.apache.spark.deploy.worker.Worker")
    assert command[main:] == args[1:]
    for key, value in _worker_opts().items():
        assert f"-D{key}={value}" in command[:main], command


#: Arguments of the SeaweedFS image's `server` command line (``-name=value`` or a bare ``-name``).
def _weed_flags(args: list[str]) -> dict[str, str]:
    assert all(a.startswith("-") for a in args), args
    return dict((a.lstrip("-").split("=", 1) + ["true"])[:2] for a in args)


def _run_shell(tmp_path: Path, script: str, env: dict[str, str], fakes: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a container's shell line with /bin/sh, the programs it calls replaced by shell fakes on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in fakes.items():
        fake = bin_dir / name
        fake.write_text("#!/bin/sh\n" + body)
        fake.chmod(0o755)
    full = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), **env}
    return subprocess.run(["/bin/sh", "-c", script], env=full, capture_output=True, text=True, timeout=60)


def test_seaweedfs_serves_s3_where_the_clients_look():
    services = compose()["services"]
    args = argv(services[S3_SERVICE])
    assert args[0] == "server", "master, volume server and filer in one process (the entrypoint adds -dir=/data)"
    flags = _weed_flags(args[1:])
    assert flags["s3"] == "true", "with the S3 gateway"
    assert int(flags.get("s3.port", 8333)) == S3_PORT
    assert flags["ip"] == S3_SERVICE, "the servers find each other by the service name"
    assert flags["ip.bind"] == "0.0.0.0", "listening on every interface (the health check uses localhost)"
    assert "s3.domainName" not in flags, "no virtual-host buckets: every client uses path-style requests"
    assert "s3.config" not in flags and "s3.iam.config" not in flags, "the admin identity is the environment's"
    assert set(service_env(services[S3_SERVICE])) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


#: A curl that answers from a table: $UP answer 200, $FAILING 503, anything else is refused (exit 7).
_FAKE_CURL = """
fail=0; url=
for arg in "$@"; do
  case "$arg" in -*f*) case "$arg" in --*) ;; *) fail=1 ;; esac ;; http://*) url=$arg ;; esac
done
echo "$url" >> "$HOME/asked"
for u in $UP; do [ "$u" = "$url" ] && exit 0; done
for u in $FAILING; do [ "$u" = "$url" ] && { [ $fail = 1 ] && exit 22; exit 0; }; done
exit 7
"""


def test_seaweedfs_is_healthy_once_its_s3_api_and_volume_server_answer(tmp_path):
    """The check runs with fake curls: healthy only if the S3 gateway and the volume server both answer 200."""
    service = compose()["services"][S3_SERVICE]
    kind, script = service["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    s3 = f"http://localhost:{S3_PORT}/healthz"  # the S3 gateway listens only once it reached the filer
    volume = "http://localhost:8080/healthz"  # 503 until the volume server heartbeats to the master

    def healthy(up: list[str], failing: list[str] = []) -> bool:  # noqa: B006 - not mutated
        (tmp_path / "asked").unlink(missing_ok=True)
        return _run_shell(tmp_path, script, {"UP": " ".join(up), "FAILING": " ".join(failing)}, {"curl": _FAKE_CURL}).returncode == 0

    assert healthy([s3, volume])
    assert set((tmp_path / "asked").read_text().split()) == {s3, volume}
    assert not healthy([volume]), "S3 gateway not listening yet"
    assert not healthy([s3], failing=[volume]), "volume server not heartbeating (503)"
    assert not healthy([volume], failing=[s3])
    assert not healthy([])
    assert "volume.port" not in _weed_flags(argv(service)[1:]), "the volume server keeps its port, 8080"


#: An aws CLI that logs its arguments and plays a server where bucket $BUCKET_STATE is "exists", "missing" or "down".
_FAKE_AWS = """
echo "$*" >> "$HOME/aws.log"
case "$1 $2" in
  "configure set") exit 0 ;;
esac
[ "$BUCKET_STATE" = down ] && { echo "Could not connect to the endpoint URL" >&2; exit 255; }
case "$2" in
  head-bucket) [ "$BUCKET_STATE" = exists ] && exit 0; echo "Not Found" >&2; exit 254 ;;
  create-bucket) [ "$BUCKET_STATE" = exists ] && { echo BucketAlreadyOwnedByYou >&2; exit 254; }; exit 0 ;;
esac
exit 252
"""


def test_seaweedfs_init_makes_the_bucket_once_and_fails_while_s3_is_down(tmp_path):
    """The one-shot job's shell line, run with /bin/sh and a fake aws: idempotent, path-style, non-zero on failure."""
    service = compose()["services"][S3_INIT]
    assert service["image"].startswith("amazon/aws-cli:"), "the AWS CLI image, whose entrypoint is aws: replaced by a shell"
    assert service["entrypoint"] == ["/bin/sh", "-c"] and len(service["command"]) == 1
    env = service_env(service)
    bucket = env["EPOCHAL_BUCKET"]
    assert env["AWS_ENDPOINT_URL_S3"] == f"http://{S3_SERVICE}:{S3_PORT}"
    assert env["AWS_EC2_METADATA_DISABLED"] == "true", "no instance-metadata lookups for credentials or region"

    def run(state: str) -> tuple[int, list[str]]:
        (tmp_path / "aws.log").unlink(missing_ok=True)
        done = _run_shell(tmp_path, service["command"][0], {**env, "BUCKET_STATE": state}, {"aws": _FAKE_AWS})
        return done.returncode, (tmp_path / "aws.log").read_text().splitlines()

    path_style = "configure set default.s3.addressing_style path"
    code, calls = run("missing")
    assert code == 0 and calls == [path_style, f"s3api head-bucket --bucket {bucket}", f"s3api create-bucket --bucket {bucket}"]
    code, calls = run("exists")
    assert code == 0 and calls == [path_style, f"s3api head-bucket --bucket {bucket}"], "a second `up` changes nothing"
    code, calls = run("down")
    assert code != 0, "restart: on-failure retries it, and `up` fails after the last attempt"


# ----------------------------------------------------------------------------- README snippets of deploy/


def _not_in(part: Any, whole: Any, path: str = "") -> list[str]:
    """Where ``part`` is not a sub-mapping of ``whole`` (mappings: a subset of keys; the rest: equal)."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return [f"{path or '<root>'}: a mapping in the README, {type(whole).__name__} in the file"]
        missing = [f"{path}{key}: not in the file" for key in part if key not in whole]
        return missing + [d for key in part if key in whole for d in _not_in(part[key], whole[key], f"{path}{key}.")]
    if isinstance(part, list):
        if not isinstance(whole, list) or len(part) != len(whole):
            return [f"{path.rstrip('.')}: {part!r} in the README, {whole!r} in the file"]
        return [d for i, (p, w) in enumerate(zip(part, whole)) for d in _not_in(p, w, f"{path}{i}.")]
    return [] if part == whole else [f"{path.rstrip('.')}: {part!r} in the README, {whole!r} in the file"]


def _readme_yaml_after(marker: str) -> list[Any]:
    """The YAML of the first fenced block after each ``marker`` (a yaml block, in the same paragraph or the next)."""
    text = (ROOT / "README.md").read_text()
    found = []
    for start in [m.start() for m in re.finditer(re.escape(marker), text)]:
        block = re.compile(r"^```(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^```", re.M | re.S).search(text, start)
        between = text[start : block.start()] if block else ""
        assert block and block.group("lang") == "yaml" and "\n\n\n" not in between and "\n#" not in between, (
            f"no yaml block right after {marker!r}"
        )
        found.append(yaml.safe_load(block.group("body")))
    return found


def test_readme_shows_parts_of_the_deployed_files():
    (pipeline,) = _readme_yaml_after("**The pipeline's configuration** is `deploy/epochal-compose.yaml`")
    deployed = yaml.safe_load((DEPLOY / "epochal-compose.yaml").read_text())
    assert not _not_in(pipeline, deployed), _not_in(pipeline, deployed)
    instance = _readme_yaml_after("<!-- doctest: dagster.yaml -->")
    assert instance, "the README shows the run limits of deploy/dagster.yaml"
    dagster_yaml = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    for snippet in instance:
        assert not _not_in(snippet, dagster_yaml), _not_in(snippet, dagster_yaml)
    # the comparison catches a value, a key or a list that differs
    assert _not_in({"checkpoints": {"retain": 4}}, deployed) == ["checkpoints.retain: 4 in the README, 3 in the file"]
    assert _not_in({"spark": {"conf": {"spark.no.such": 1}}}, deployed) == ["spark.conf.spark.no.such: not in the file"]
    limits = dagster_yaml["concurrency"]["runs"]["tag_concurrency_limits"]
    assert _not_in({"concurrency": {"runs": {"tag_concurrency_limits": limits * 2}}}, dagster_yaml)
    assert _not_in({"concurrency": {"runs": {"tag_concurrency_limits": [{**limits[0], "limit": 2}]}}}, dagster_yaml)


# ----------------------------------------------------------------------------- .dockerignore


def _dockerignore() -> list[tuple[bool, re.Pattern]]:
    """The patterns of .dockerignore as Docker reads them: (exception?, regex), in order."""
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = posixpath.normpath(line.lstrip("!").strip()).lstrip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i : end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        patterns.append((exception, re.compile(regex)))
    return patterns


def left_out(path: str, patterns: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    out = False
    for exception, regex in patterns:
        if any(regex.fullmatch(c) for c in candidates):
            out = not exception
    return out


def _copy_sources() -> list[str]:
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith(("COPY ", "ADD ")):
            args = [a for a in shlex.split(line)[1:] if not a.startswith("--")]
            sources += args[:-1]
    return sources


def test_dockerignore_sends_what_the_image_needs_and_nothing_else():
    patterns = _dockerignore()
    sources = _copy_sources()
    assert set(sources) == {"pyproject.toml", "README.md", "requirements.lock", "epochal", "config", "state", "pipeline",
                            "orchestration", "deploy"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["readme"] in sources, "pip install . reads the readme"
    assert "requirements.lock" in sources, "pip install -c requirements.lock"
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        assert folder in sources, f"the package {package} (folder {folder}/) is copied"
    for source in sources:
        assert not left_out(source, patterns), f"{source} is left out of the build context"
        path = ROOT / source
        files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
        for file in files:
            name = file.relative_to(ROOT).as_posix()
            if "__pycache__" in file.parts or file.suffix in {".pyc", ".pyo"}:
                assert left_out(name, patterns), name
            else:
                assert not left_out(name, patterns), f"{name} is needed by the image but left out"
    for entry in ROOT.iterdir():  # whatever else is here, now or later, stays out
        if entry.name not in sources:
            assert left_out(entry.name, patterns), f"{entry.name} is sent to the Docker build"
    for name in (".venv/bin/python", ".git/HEAD", ".env", "data/demo/x", "tests/docs/test_docs.py", "bench/README.md",
                 "bench/results/results.json", "docs/images/lineage.png", ".pytest_cache/v/x", ".hypothesis/x",
                 "epochal.egg-info/PKG-INFO", "spark-warehouse/t/x.parquet", "state/__pycache__/x.cpython-311.pyc",
                 "pipeline/x.pyc", "orchestration/.pytest_cache/x", "config/spark-warehouse/x", "Makefile"):
        assert left_out(name, patterns), f"{name} is sent to the Docker build"
