"""docker-compose.yml and its configuration, checked statically (no Docker engine here)."""

from __future__ import annotations

from pathlib import Path

import yaml

from config import load_settings

ROOT = Path(__file__).resolve().parents[1]


def test_compose_services_build_the_project_and_mount_their_data():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"epochal", "demo"}
    for name, service in services.items():
        assert service["build"] == "." and (ROOT / "Dockerfile").exists(), name
        assert any(v.startswith("./data:") for v in service["volumes"]), name
        assert service["command"][0] in {"run", "demo"}
    config_path = services["epochal"]["environment"]["EPOCHAL_CONFIG"]
    mount = next(v for v in services["epochal"]["volumes"] if v.startswith("./deploy:"))
    host, container = mount.split(":")[:2]
    local = ROOT / host / Path(config_path).relative_to(container)
    settings = load_settings(local, env={})
    assert settings.landing.startswith("/data/") and settings.checkpoints.dir.startswith("/data/")


def test_dockerfile_bakes_in_the_jars_and_runs_the_cli():
    text = (ROOT / "Dockerfile").read_text()
    assert "openjdk-17" in text and "python -m state.session --warm" in text
    assert 'ENTRYPOINT ["epochal"]' in text
    for package in ("config", "state", "pipeline", "orchestration"):
        assert f"COPY {package} ./{package}" in text
