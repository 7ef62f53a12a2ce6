"""docker-compose.yml, the Dockerfile and deploy/, checked statically (no Docker engine runs here).

The compose file is parsed with YAML and its ``${VAR:-default}`` values are
interpolated as Compose does with an empty environment (the try-out defaults).
Dagster's own code validates deploy/dagster.yaml and deploy/workspace.yaml and
parses every Dagster command line of the compose file; the pipeline's
configuration is loaded with ``config.load_settings`` in the environment of the
container that runs it, and compared with the services it names. The health
checks that are Python run here against a fake of what they query; the
.dockerignore is matched like Docker does against the Dockerfile's COPY
sources; the README's snippets of deploy/ files are parts of those files.
"""

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

from epochal.config import load_settings
from tests.support.paths import ROOT
DEPLOY = ROOT / "deploy"
COMPOSE_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
DAGSTER_SERVICES = ("dagster-init", "dagster-code", "dagster-webserver", "dagster-daemon")
LONG_RUNNING = ("postgres", "seaweedfs", "spark-master", "spark-worker", "dagster-code", "dagster-webserver", "dagster-daemon")
ONE_SHOT = ("seaweedfs-init", "dagster-init")
ON_DEMAND = ("sample-data", "demo")  # profile "tools": only when named (docker compose run --rm NAME)
#: Published ports a user opens, by service.
PUBLISHED = {
    "dagster-webserver": {3000},
    "seaweedfs": {8333},  # the S3 API only: the filer, master and volume ports stay inside
    "spark-master": {8080},
    "spark-worker": {8081},
}
#: The AWS SDK v2 bundle (software.amazon.awssdk:bundle) each hadoop-aws release was built
#: against (hadoop-project's aws-java-sdk-v2.version).
AWS_SDK_FOR_HADOOP = {"3.5.0": "2.35.4"}
#: The S3 service (SeaweedFS), its one-shot bucket job, and the port of its S3 API.
S3_SERVICE, S3_INIT, S3_PORT = "seaweedfs", "seaweedfs-init", 8333

_VAR = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}|\$\$")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's interpolation: ``${VAR}``, ``${VAR:-default}``; ``$$`` is a literal ``$``."""
    if isinstance(value, str):

        def one(match: re.Match) -> str:
            if match.group(0) == "$$":
                return "$"
            name, default = match.group("name"), match.group("default")
            if name in env:
                return env[name]
            if default is None:
                raise AssertionError(f"${{{name}}} has no default and is not set")
            return default

        return _VAR.sub(one, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    return interpolate(yaml.safe_load((ROOT / "docker-compose.yml").read_text()), env or {})


def service_env(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {k: str(v) for k, v in environment.items()}


def argv(service: dict[str, Any]) -> list[str]:
    """The container's command line: entrypoint then command (lists, or strings split like a shell)."""
    parts: list[str] = []
    for key in ("entrypoint", "command"):
        value = service.get(key, [])
        parts += shlex.split(value) if isinstance(value, str) else list(value)
    return parts


def option(args: list[str], *names: str) -> str:
    for i, arg in enumerate(args):
        if arg in names:
            return args[i + 1]
    raise AssertionError(f"none of {names} in {args}")


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path (bind mounts) or volume name."""
    out = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        out[container] = host
    return out


def host_file(service: dict[str, Any], container_path: str) -> Path:
    """The repository file a container path of a service is bind-mounted from."""
    for container, host in sorted(mounts(service).items(), key=lambda kv: -len(kv[0])):
        if container_path == container or container_path.startswith(container.rstrip("/") + "/"):
            assert host.startswith("./"), f"{container_path} is on volume {host}, not a repository file"
            return ROOT / host / Path(container_path).relative_to(container)
    raise AssertionError(f"{container_path} is not mounted from the repository")


def pipeline_settings(service_name: str = "dagster-code"):
    service = compose()["services"][service_name]
    env = service_env(service)
    return load_settings(host_file(service, env["EPOCHAL_CONFIG"]), env=env), env


# ----------------------------------------------------------------------------- compose structure


def test_every_service_has_an_image_health_check_or_a_one_shot_role():
    """Long-running services restart unless stopped; one-shot jobs retry a failure a few times.

    A one-shot job under ``restart: on-failure:N`` is "restarting", not "exited", between
    attempts (Docker sets the state under the container's lock), so Compose, which waits for
    the state "exited" for ``service_completed_successfully``, keeps waiting through the
    retries and fails only on a last non-zero exit.
    """
    services = compose()["services"]
    assert set(services) == set(LONG_RUNNING) | set(ONE_SHOT) | set(ON_DEMAND)
    for name, service in services.items():
        image = service.get("image", "")
        assert image, f"{name}: every service names its image"
        if "build" in service:
            assert service["build"] == "." and image == "epochal:local", f"{name}: the project image is built from ."
        else:
            tag = image.rsplit(":", 1)[-1] if ":" in image else ""
            assert tag and tag != "latest", f"{name}: external image {image!r} must be pinned to a tag"
        if name in LONG_RUNNING:
            test = service.get("healthcheck", {}).get("test")
            assert test and test[0] in {"CMD", "CMD-SHELL"}, f"{name}: a long-running service has a health check"
            assert service.get("restart") == "unless-stopped", f"{name}: comes back after a crash or a reboot"
        if name in ONE_SHOT:
            retries = re.fullmatch(r"on-failure:(\d+)", str(service.get("restart")))
            assert retries and 1 <= int(retries.group(1)) <= 10, f"{name}: a bounded number of retries"
            assert "healthcheck" not in service, name
        if name in ON_DEMAND:
            assert service.get("profiles") == ["tools"], f"{name}: not started by a plain `docker compose up`"
            assert "restart" not in service, f"{name}: run once (docker compose run --rm)"
        published = {int(str(p).split(":")[0]) for p in service.get("ports", [])}
        assert published == PUBLISHED.get(name, set()), f"{name}: published ports"
        if "build" in service:
            assert argv(service), f"{name}: the project image runs an explicit command"


def test_dependencies_exist_and_start_in_order():
    services = compose()["services"]
    graph: dict[str, set[str]] = {}
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on with conditions, not a bare list"
        graph[name] = set(depends)
        for target, spec in depends.items():
            assert target in services, f"{name} depends on unknown service {target}"
            condition = spec["condition"]
            assert condition in COMPOSE_CONDITIONS, f"{name} -> {target}: {condition}"
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}'s health, which has no check"
            if condition == "service_completed_successfully":
                assert target in ONE_SHOT, f"{name} waits for {target} to finish, but it keeps running"
    from graphlib import TopologicalSorter

    order = list(TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    position = {name: i for i, name in enumerate(order)}
    assert position[S3_INIT] < position["dagster-code"] and position["dagster-init"] < position["dagster-code"]
    assert services[S3_INIT]["depends_on"][S3_SERVICE]["condition"] == "service_healthy", "the bucket once S3 answers"
    for server in ("dagster-webserver", "dagster-daemon"):
        assert graph[server] >= {"postgres", "dagster-code"}
        assert services[server]["depends_on"]["dagster-code"]["condition"] == "service_healthy"
    assert services["dagster-code"]["depends_on"]["spark-worker"]["condition"] == "service_healthy"


def test_volumes_are_declared_or_files_of_the_repository():
    document = compose()
    declared = set(document.get("volumes", {}))
    used = set()
    for name, service in document["services"].items():
        for container, host in mounts(service).items():
            assert container.startswith("/"), f"{name}: {container}"
            if host.startswith("./"):
                if host != "./data":  # the demo's output folder, created by Docker
                    assert (ROOT / host).exists(), f"{name} mounts {host}, which is not in the repository"
            else:
                assert host in declared, f"{name} uses volume {host}, not declared under volumes:"
                used.add(host)
    assert used == declared, "every declared volume is used"
    assert "/var/lib/postgresql/data" in mounts(document["services"]["postgres"])
    assert mounts(document["services"][S3_SERVICE])["/data"] == "seaweedfs-data", "objects and filer metadata survive a restart"


# ----------------------------------------------------------------------------- Dagster


def test_dagster_containers_share_one_environment_and_instance():
    services = compose()["services"]
    envs = {name: service_env(services[name]) for name in DAGSTER_SERVICES}
    base = envs["dagster-init"]
    for name, env in envs.items():
        extra = {k: v for k, v in env.items() if k not in base}
        assert {k: env[k] for k in base} == base, f"{name}: the shared environment"
        assert set(extra) <= {"SPARK_LOCAL_HOSTNAME"}, name
        home = env["DAGSTER_HOME"]
        assert host_file(services[name], f"{home}/dagster.yaml") == DEPLOY / "dagster.yaml"
        assert mounts(services[name])[f"{home}/storage"] == "dagster-storage", f"{name}: shared compute logs"
        assert host_file(services[name], env["EPOCHAL_CONFIG"]).is_file()
        assert host_file(services[name], env["PYTHONPATH"]) == DEPLOY / "pipelines", f"{name}: users' pipeline packages"
    settings, env = pipeline_settings()
    assert str(settings.dagster.home) == env["DAGSTER_HOME"]
    postgres = service_env(services["postgres"])
    assert (base["DAGSTER_PG_USER"], base["DAGSTER_PG_PASSWORD"], base["DAGSTER_PG_DB"]) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"]
    )
    assert base["DAGSTER_PG_HOST"] == "postgres"


def _env_refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        if set(node) == {"env"}:
            return {node["env"]}
        return set().union(*(_env_refs(v) for v in node.values())) if node else set()
    if isinstance(node, list):
        return set().union(*(_env_refs(v) for v in node)) if node else set()
    return set()


def test_dagster_yaml_passes_dagsters_validation_with_postgres_and_limits():
    from dagster._core.instance.config import ConcurrencyConfig, PoolGranularity, dagster_instance_config
    from dagster._core.instance.ref import InstanceRef

    config, custom_class = dagster_instance_config(str(DEPLOY))  # raises DagsterInvalidConfigError
    assert custom_class is None
    ref = InstanceRef.from_dir(str(DEPLOY))
    for data in (ref.storage_data, ref.run_storage_data, ref.event_storage_data, ref.schedule_storage_data):
        assert data.module_name == "dagster_postgres", data
    deploy_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["deploy"]
    assert any(req.startswith("dagster-postgres==") for req in deploy_extra)
    env = service_env(compose()["services"]["dagster-code"])
    assert _env_refs(config["storage"]) <= set(env), "every variable dagster.yaml reads is set in the containers"
    assert _env_refs(config["storage"]) == {"DAGSTER_PG_HOST", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"}

    coordinator = ref.run_coordinator_data.rehydrate(object)  # imports the class and validates its config
    assert type(coordinator).__name__ == "QueuedRunCoordinator"
    assert coordinator.dequeue_interval_seconds == 1  # Dagster's default 5 s: a launched run waited 2.5 s more
    assert type(ref.run_launcher_data.rehydrate(object)).__name__ == "DefaultRunLauncher"
    effective = ConcurrencyConfig.from_concurrency_settings(config["concurrency"], coordinator.get_run_queue_config())
    assert effective.pool_config.pool_granularity is PoolGranularity.RUN
    assert effective.pool_config.default_pool_limit == 1
    _one_epoch_run_per_pipeline(effective.run_queue_config.tag_concurrency_limits)


def _one_epoch_run_per_pipeline(limits) -> None:
    """Dagster's run queue counter: a second run of one pipeline waits, another pipeline's does not."""
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    def run(pipeline: str) -> DagsterRun:
        return DagsterRun(job_name=f"{pipeline}_epochs", tags={"epochal/deployment": pipeline})

    counter = TagConcurrencyLimitsCounter(limits, [run("clickstream")])
    assert counter.is_blocked(run("clickstream"))
    assert not counter.is_blocked(run("other"))
    assert not TagConcurrencyLimitsCounter(limits, []).is_blocked(run("clickstream"))


def test_a_broken_dagster_yaml_is_refused_by_the_same_validation(tmp_path):
    from dagster._core.errors import DagsterInvalidConfigError
    from dagster._core.instance.config import dagster_instance_config

    text = (DEPLOY / "dagster.yaml").read_text()
    cases = {
        "a misspelled key": text.replace("tag_concurrency_limits:", "tag_concurrency_limit:"),
        "limits both in concurrency and the coordinator": text.replace(
            "    dequeue_interval_seconds: 1",
            "    dequeue_interval_seconds: 1\n    tag_concurrency_limits: []",
        ),
    }
    for what, broken in cases.items():
        assert broken != text, what
        folder = tmp_path / what.replace(" ", "-")
        folder.mkdir()
        (folder / "dagster.yaml").write_text(broken)
        with pytest.raises(DagsterInvalidConfigError):
            dagster_instance_config(str(folder))


def test_workspace_points_at_the_code_server():
    from dagster._core.workspace.config_schema import ensure_workspace_config

    path = DEPLOY / "workspace.yaml"
    workspace = ensure_workspace_config(yaml.safe_load(path.read_text()), str(path))
    (entry,) = workspace["load_from"]
    grpc = entry["grpc_server"]
    services = compose()["services"]
    code_args = argv(services["dagster-code"])
    assert grpc["host"] == "dagster-code"
    assert grpc["port"] == int(option(code_args, "-p", "--port"))
    assert grpc["location_name"] == option(code_args, "--location-name")
    assert option(code_args, "-m", "--module-name") == "epochal.orchestration.definitions"
    assert option(code_args, "-h", "--host") == "0.0.0.0"
    for name in ("dagster-webserver", "dagster-daemon"):
        home = service_env(services[name])["DAGSTER_HOME"]
        workspace_arg = option(argv(services[name]), "-w", "--workspace")
        assert workspace_arg == f"{home}/workspace.yaml"
        assert host_file(services[name], workspace_arg) == path


def _click_parse(args: list[str]) -> None:
    from tests.support.dagster_cli import parse_dagster_command

    parse_dagster_command(args)


def _mounted(service: dict[str, Any], arg: str) -> str:
    if not arg.startswith("/"):
        return arg
    try:
        return str(host_file(service, arg))
    except AssertionError:
        return arg


def test_dagster_command_lines_parse_with_the_installed_dagster():
    services = compose()["services"]
    lines = [(name, argv(services[name])) for name in DAGSTER_SERVICES]
    lines += [(name, services[name]["healthcheck"]["test"][1:]) for name in ("dagster-code", "dagster-daemon")]
    for name, args in lines:
        # files the command names are the repository's files mounted there (click checks they exist)
        _click_parse([_mounted(services[name], arg) for arg in args])
    import click

    with pytest.raises(click.UsageError):  # the parser is strict: an unknown option fails
        _click_parse(["dagster", "code-server", "start", "--no-such-option"])
    assert argv(services["dagster-init"])[-3:] == ["set", "epochal", "1"]


def test_pool_and_run_tag_match_the_definitions():
    assets = pytest.importorskip("epochal.orchestration.assets", reason="the Dagster definitions are not in this tree")
    assert argv(compose()["services"]["dagster-init"])[-2] == assets.POOL
    config = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    assert [limit["key"] for limit in config["concurrency"]["runs"]["tag_concurrency_limits"]] == [assets.DEPLOYMENT_TAG]


# ----------------------------------------------------------------------------- the pipeline's configuration


def test_pipeline_configuration_agrees_with_the_services():
    services = compose()["services"]
    settings, env = pipeline_settings()  # the code server's environment overrides included
    init_env = service_env(services[S3_INIT])
    bucket = init_env["EPOCHAL_BUCKET"]
    assert f'--bucket "$EPOCHAL_BUCKET"' in " ".join(services[S3_INIT]["command"]), "the init job makes that bucket"
    for key in ("landing", "warehouse", "checkpoints.dir"):
        url = urlparse(settings.get(key))
        assert url.scheme in {"s3", "s3a"} and url.netloc == bucket, f"{key} = {settings.get(key)}"
    assert urlparse(settings.warehouse).scheme == "s3a", "Delta tables through Hadoop's S3A"
    conf = settings.spark.conf
    s3_api = urlparse(conf["spark.hadoop.fs.s3a.endpoint"])
    endpoint = f"http://{S3_SERVICE}:{S3_PORT}"
    assert env["FSSPEC_S3_ENDPOINT_URL"] == conf["spark.hadoop.fs.s3a.endpoint"] == init_env["AWS_ENDPOINT_URL_S3"] == endpoint
    assert s3_api.hostname in services and s3_api.port in PUBLISHED[s3_api.hostname]
    assert env["AWS_REGION"] == init_env["AWS_REGION"], "one region for every S3 client"
    import fsspec.config

    s3fs_options: dict = {}
    fsspec.config.set_conf_env(s3fs_options, env)  # what s3fs gets from FSSPEC_S3_* in the containers
    assert s3fs_options == {"s3": {"endpoint_url": endpoint, "use_listings_cache": False}}
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem", "s3:// landing files"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"

    master = urlparse(settings.spark.master)
    master_args = argv(services["spark-master"])
    assert master.scheme == "spark" and master.hostname == option(master_args, "--host") == "spark-master"
    assert master.port == int(option(master_args, "--port"))
    assert settings.spark.master in argv(services["spark-worker"])
    worker_args = argv(services["spark-worker"])
    assert option(worker_args, "--host") == "spark-worker", "executors advertise a name the driver resolves"
    assert int(option(worker_args, "--cores")) >= int(conf["spark.cores.max"]) >= settings.spark.parallelism
    # the driver runs in dagster-code: it advertises that name (spark.driver.host defaults to
    # SPARK_LOCAL_HOSTNAME) and listens on every interface
    assert "spark.driver.host" not in conf and env["SPARK_LOCAL_HOSTNAME"] == "dagster-code"
    assert conf["spark.driver.bindAddress"] == "0.0.0.0"
    from epochal.state.session import spark_conf

    # what the code server's sessions get, S3A settings derived from its environment included
    effective = spark_conf(settings.spark, locations=tuple(settings.storage_locations()), environ=env)
    assert "spark.driver.host" not in effective, "nothing overrides it for a cluster master"
    assert effective["spark.hadoop.fs.s3a.endpoint"] == env["FSSPEC_S3_ENDPOINT_URL"]
    assert effective["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert effective["spark.hadoop.fs.s3a.path.style.access"] == "true"

    assert settings.dagster.webserver_port == int(option(argv(services["dagster-webserver"]), "-p", "--port"))
    sample = argv(services["sample-data"])
    assert option(sample, "--landing") == settings.landing
    assert option(sample, "--start") == f"{settings.partitions.start:%Y-%m-%dT%H}", "sample hours from the first partition"
    assert settings.dagster.schedule_enabled is False, "a first tick would run every window since partitions.start"


def test_credentials_come_from_the_environment_only():
    text = (DEPLOY / "epochal-compose.yaml").read_text()
    settings, env = pipeline_settings()
    flat = repr(settings.model_dump(mode="json")).lower()
    for word in ("secret", "access.key", "password", env["AWS_SECRET_ACCESS_KEY"].lower()):
        assert word not in flat, f"{word!r} in the pipeline's configuration"
    assert "AWS_" not in text or "AWS_ACCESS_KEY_ID" in text  # named in a comment at most
    raw = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    # SeaweedFS makes AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY its admin identity; the bucket
    # job, the code server and the Spark worker sign with the same pair.
    users = [service_env(raw[name]) for name in (S3_SERVICE, S3_INIT, "dagster-code", "spark-worker")]
    assert {u["AWS_ACCESS_KEY_ID"] for u in users} == {"${EPOCHAL_S3_ACCESS_KEY:-epochal}"}
    assert {u["AWS_SECRET_ACCESS_KEY"] for u in users} == {"${EPOCHAL_S3_SECRET_KEY:-epochal-secret}"}
    chosen = compose({"EPOCHAL_S3_SECRET_KEY": "from-the-host"})["services"]
    for name in (S3_SERVICE, S3_INIT, "dagster-code", "spark-worker"):
        assert service_env(chosen[name])["AWS_SECRET_ACCESS_KEY"] == "from-the-host", name


# ----------------------------------------------------------------------------- Dockerfile


def test_dockerfile_bakes_in_the_jars_of_the_deployed_configuration():
    text = (ROOT / "Dockerfile").read_text()
    assert "openjdk-17" in text and "EPOCHAL_IVY_DIR=/opt/ivy" in text
    assert "pip install --no-cache-dir -c requirements.lock '.[deploy]'" in text, "the locked versions"
    assert "python -m epochal.state.session --warm --config deploy/epochal-compose.yaml" in text
    assert 'ENTRYPOINT ["epochal"]' in text
    for package in ("epochal", "config", "state", "pipeline", "orchestration", "deploy"):
        assert f"COPY {package} ./{package}" in text
    assert re.search(r"^COPY [^\n]*\brequirements\.lock\b[^\n]* \./$", text, re.M), "the lock is in the image"
    settings, _ = pipeline_settings()
    packages = dict(p.rsplit(":", 1) for p in settings.spark.conf["spark.jars.packages"].split(","))
    hadoop_aws = packages["org.apache.hadoop:hadoop-aws"]
    import pyspark

    bundled = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    assert [p.name for p in bundled] == [f"hadoop-client-api-{hadoop_aws}.jar"], "hadoop-aws = pyspark's Hadoop"
    assert set(packages) == {"org.apache.hadoop:hadoop-aws", "software.amazon.awssdk:bundle"}, "SDK v2, not v1"
    assert packages["software.amazon.awssdk:bundle"] == AWS_SDK_FOR_HADOOP[hadoop_aws]
    from epochal.state.delta.objectstore import S3A_PACKAGES

    assert sorted(settings.spark.conf["spark.jars.packages"].split(",")) == sorted(S3A_PACKAGES)


def test_dockerfile_and_deploy_extra_are_in_step_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM python:(\d+\.\d+)-slim-bookworm$", text, re.M)
    assert base, "the image starts from an official python:X.Y-slim-bookworm image"
    from packaging.specifiers import SpecifierSet

    assert base.group(1) in SpecifierSet(project["requires-python"]), "a Python the project supports"
    preferred = re.search(r"for p in python(\d+\.\d+) ", (ROOT / "Makefile").read_text())
    assert preferred and base.group(1) == preferred.group(1), "the Python `make setup` prefers (and tests run on)"
    pins = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", d).groups() for d in project["dependencies"] if "==" in d)
    import pyspark

    assert pyspark.__version__ == pins["pyspark"]
    deploy = dict(re.match(r"([A-Za-z0-9_.-]+)==(\S+)", d).groups() for d in project["optional-dependencies"]["deploy"] if "==" in d)
    major, minor, patch = pins["dagster"].split(".")
    assert major == "1", "dagster's libraries are numbered 0.(minor+16).patch for dagster 1.x"
    assert deploy["dagster-postgres"] == f"0.{int(minor) + 16}.{patch}"
    # The image installs with -c requirements.lock: the deploy extra and what it pulls in are locked too.
    lock = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), re.M))
    assert lock["dagster-postgres"] == deploy["dagster-postgres"] and "psycopg2-binary" in lock
    assert lock["pyspark"] == pins["pyspark"] and lock["dagster"] == pins["dagster"]
    assert any(d.startswith("s3fs") for d in project["dependencies"]), "s3:// checkpoints work in every install"
    assert "dagster-postgres" not in " ".join(project["optional-dependencies"]["test"]), "make test stays light"
