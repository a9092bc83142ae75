"""The container recipe: what can be checked without a container engine.

The health check's own command runs against a real server on another port; the compose
file's settings go through the service's own settings parser.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api import create_app
from app.settings import Settings

from .servers import free_port, serve_port

ROOT = Path(__file__).resolve().parent.parent


def _healthcheck() -> list[str]:
    """The HEALTHCHECK's command, as the Dockerfile gives it (exec form)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    found = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])", dockerfile)
    assert found, "the Dockerfile has a HEALTHCHECK in exec form"
    command: list[str] = json.loads(found.group(1))
    assert command[0] == "python"
    return [sys.executable, *command[1:]]


def test_the_health_check_asks_the_port_the_service_listens_on(
    tmp_path: Path, corpus_index: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", corpus_index=corpus_index, search_provider="local"
    )
    with serve_port(create_app(settings), lifespan="on") as port:
        env = os.environ | {"RESEARCH_PORT": str(port)}
        healthy = subprocess.run(_healthcheck(), env=env, capture_output=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr
    env = os.environ | {"RESEARCH_PORT": str(free_port())}
    unhealthy = subprocess.run(_healthcheck(), env=env, capture_output=True, timeout=30)
    assert unhealthy.returncode != 0


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("key", ['with"quote', "back\\slash", "plain-key"])
def test_compose_passes_any_key_through(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    template = _compose()["x-research-env"]["RESEARCH_API_KEYS"]
    value = re.sub(r"\$\{RESEARCH_API_KEY:\?[^}]*\}", lambda _: key, template)
    monkeypatch.setenv("RESEARCH_API_KEYS", value)
    assert [k.get_secret_value() for k in Settings().api_keys] == [key]


def test_compose_runs_without_privileges_and_redis_with_a_password_and_a_cap() -> None:
    services = _compose()["services"]
    for name in ("api", "worker"):
        assert services[name]["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in services[name]["security_opt"]
    redis = " ".join(services["redis"]["command"])
    assert "--requirepass" in redis and "--maxmemory-policy noeviction" in redis
    assert "REDIS_PASSWORD" in _compose()["x-research-env"]["RESEARCH_REDIS_URL"]


def test_the_image_installs_pinned_dependencies_before_the_source() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    pinned = dockerfile.index("pip install -r constraints.txt")
    assert pinned < dockerfile.index("COPY app ") < dockerfile.index("pip install --no-deps .")
    lines = [ln for ln in (ROOT / "constraints.txt").read_text().splitlines() if ln[:1].isalnum()]
    assert lines and all("==" in ln for ln in lines), "every dependency pinned"
