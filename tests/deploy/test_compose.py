"""docker-compose.yml against the Compose specification's JSON schema, and what it must say
to drive a cluster.

The schema is the one the Compose specification's reference library embeds
(github.com/compose-spec/compose-go/v2, ``schema/compose-spec.json``), fetched at a pinned
version through the Go module proxy into the module cache, like the other Go parts the suite
builds; nothing of it is copied into this repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_GO = "github.com/compose-spec/compose-go/v2@v2.16.2"
PORTAL = ("migrate", "web", "worker", "beat")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def _schema_path() -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(go).exists():
        pytest.fail(
            "the Compose schema comes from a Go module: install Go (deploy/test.sh needs it)"
        )
    with tempfile.TemporaryDirectory() as scratch:  # outside any Go module of this repository
        done = subprocess.run(
            [go, "mod", "download", "-json", COMPOSE_GO],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "GOFLAGS": "-mod=mod"},
        )
    if done.returncode != 0:
        pytest.fail(f"go mod download {COMPOSE_GO} failed: {done.stdout}{done.stderr}")
    return Path(json.loads(done.stdout)["Dir"]) / "schema" / "compose-spec.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(_schema_path().read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_compose_file_follows_the_specification(
    compose: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(compose)
    ]
    assert errors == []


def test_schema_catches_what_compose_would_refuse(
    compose: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    """The check can fail: a misspelt key and a wrong type are both reported."""
    broken = json.loads(json.dumps(compose))
    broken["services"]["web"]["healthcheck"]["intervall"] = "10s"
    broken["services"]["worker"]["depends_on"] = "migrate"
    messages = [e.message for e in validator.iter_errors(broken)]
    assert any("intervall" in m for m in messages)
    assert any("'migrate'" in m for m in messages)


def test_portal_services_drive_a_cluster_and_read_metrics(compose: dict[str, Any]) -> None:
    for name in PORTAL:
        service = compose["services"][name]
        mounts = [v for v in service["volumes"] if isinstance(v, dict)]
        kubeconfig = next(v for v in mounts if v["target"] == "/etc/gpupaas/kubeconfig")
        assert kubeconfig["read_only"] is True and "KUBECONFIG_FILE" in kubeconfig["source"]
        assert "PROMETHEUS_URL" in service["environment"], name
    command = " ".join(compose["services"]["migrate"]["command"])
    assert "cluster_register" in command and "--kubeconfig /etc/gpupaas/kubeconfig" in command


def test_long_running_services_have_health_checks(compose: dict[str, Any]) -> None:
    for name in ("postgres", "redis", "web", "worker", "beat"):
        test = compose["services"][name]["healthcheck"]["test"]
        assert test[0] in {"CMD", "CMD-SHELL"}, name
    # the portal starts once the migrations ran, which start once the database answers
    migrate = compose["services"]["migrate"]["depends_on"]
    assert migrate["postgres"]["condition"] == "service_healthy"
    assert migrate["redis"]["condition"] == "service_healthy"
    for name in ("web", "worker", "beat"):
        after = compose["services"][name]["depends_on"]["migrate"]["condition"]
        assert after == "service_completed_successfully", name


def test_compose_refuses_to_start_without_the_cluster_settings() -> None:
    """``${VAR:?message}``: compose stops with the message instead of starting blind."""
    text = (ROOT / "docker-compose.yml").read_text()
    for variable in ("KUBECONFIG_FILE", "PROMETHEUS_URL", "SECRET_KEY"):
        assert f"${{{variable}:?set {variable}}}" in text
