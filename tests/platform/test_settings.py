from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings import env

ROOT = Path(__file__).resolve().parents[2]
GOOD_KEY = "k9#Zq2!vT7@pL4$wX8%rN1^bM6&cF3*hJ5(dG0)sA-eY_uQ+iO=" * 2


def test_env_helpers_parse_typed_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_BOOL", "yes")
    monkeypatch.setenv("X_INT", " 42 ")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env.env_bool("X_BOOL", False) is True
    assert env.env_int("X_INT", 0) == 42
    assert env.env_list("X_LIST") == ["a", "b", "c"]
    assert env.env_str("X_MISSING", "dflt") == "dflt"
    monkeypatch.setenv("X_RATE", " 20/min ")
    assert env.env_rate("X_RATE", "1/sec") == "20/min"
    monkeypatch.setenv("X_SIZE", " 2Ti ")
    assert env.env_storage("X_SIZE", "1Gi") == "2Ti"


@pytest.mark.parametrize(
    ("name", "value", "call"),
    [
        ("X_BOOL", "maybe", lambda: env.env_bool("X_BOOL", False)),
        ("X_INT", "4 2", lambda: env.env_int("X_INT", 0)),
        ("X_INT", "-1", lambda: env.env_int("X_INT", 0, minimum=0)),
        ("X_RATE", "600", lambda: env.env_rate("X_RATE", "1/min")),
        ("X_RATE", "10/fortnight", lambda: env.env_rate("X_RATE", "1/min")),
        ("X_SIZE", "100GB", lambda: env.env_storage("X_SIZE", "1Gi")),
        ("X_SIZE", "0Gi", lambda: env.env_storage("X_SIZE", "1Gi")),
    ],
)
def test_env_helpers_fail_loudly_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, call: object
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        call()  # type: ignore[operator]


def test_required_variable_missing_fails() -> None:
    with pytest.raises(ImproperlyConfigured, match="X_REQUIRED"):
        env.env_str("X_REQUIRED_NOT_SET_ANYWHERE")


def test_secret_from_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env.env_str("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET", "both")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env.env_str("X_SECRET")


def _manage(settings: str, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    unset = {"SECRET_KEY", "DEBUG", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": settings, **extra_env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_has_no_default_secret_key() -> None:
    result = _manage(
        "gpupaas.settings.production", "check", DATABASE_URL="postgres://u:p@127.0.0.1/db"
    )
    assert result.returncode != 0
    assert "SECRET_KEY is required" in result.stderr


def test_production_refuses_sqlite() -> None:
    result = _manage("gpupaas.settings.production", "check", SECRET_KEY=GOOD_KEY)
    assert result.returncode != 0
    assert "Production needs PostgreSQL" in result.stderr


def test_check_deploy_is_clean_under_production_settings() -> None:
    result = _manage(
        "gpupaas.settings.production",
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        SECRET_KEY=GOOD_KEY,
        DATABASE_URL="postgres://u:p@127.0.0.1/db",
        ALLOWED_HOSTS="gpu.example.com",
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_sqlite_is_the_zero_setup_default(tmp_path: Path) -> None:
    result = _manage(
        "gpupaas.settings.dev",
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DATABASES['default']['ENGINE'])",
        GPUPAAS_VAR_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "django.db.backends.sqlite3"


def test_bad_database_url_fails_loudly() -> None:
    result = _manage("gpupaas.settings.dev", "check", DATABASE_URL="nosuchscheme://x")
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_partial_oidc_configuration_fails_loudly() -> None:
    result = _manage(
        "gpupaas.settings.dev",
        "check",
        OIDC_RP_CLIENT_ID="portal",
        OIDC_OP_ISSUER="https://idp.example.com",
    )
    assert result.returncode != 0
    # Endpoints may come from discovery; the client secret cannot.
    assert "OIDC_RP_CLIENT_SECRET" in result.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "True 5"), ("false", "None None")],
    ids=["default", "turned off"],
)
def test_postgresql_binds_on_the_server_and_prepares_unless_turned_off(
    value: str | None, expected: str
) -> None:
    extra = {"DATABASE_SERVER_SIDE_BINDING": value} if value is not None else {}
    result = _manage(
        "gpupaas.settings.dev",
        "shell",
        "-c",
        "from django.conf import settings; o = settings.DATABASES['default']['OPTIONS']; "
        "print(o.get('server_side_binding'), o.get('prepare_threshold'))",
        DATABASE_URL="postgres://u:p@127.0.0.1/db",
        **extra,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == expected


def test_production_shares_rate_limits_through_redis_by_default() -> None:
    result = _manage(
        "gpupaas.settings.production",
        "shell",
        "-c",
        "from django.conf import settings; print(settings.API_RATE_LIMIT_STORE)",
        SECRET_KEY=GOOD_KEY,
        DATABASE_URL="postgres://u:p@127.0.0.1/db",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "redis"


@pytest.mark.parametrize(
    ("traffic", "metric"),
    [
        ({}, "traefik_service_requests_total"),
        ({"TRAFFIC_API": "ingress"}, "nginx_ingress_controller_requests"),
        (
            {"GATEWAY_IMPLEMENTATION": "external-auth", "GATEWAY_AUTH_SERVICE": "gp/web:8000"},
            "",
        ),
    ],
)
def test_the_scaling_loop_reads_the_metrics_of_the_gateway_in_use(
    traffic: dict[str, str], metric: str
) -> None:
    """Traefik's per-Service request metrics by default (the endpoint's own Service), the
    ingress controller's with TRAFFIC_API=ingress, and no guess for another implementation."""
    result = _manage(
        "gpupaas.settings.dev",
        "shell",
        "-c",
        "from django.conf import settings; print(repr(settings.SERVING_RPS_QUERY)); "
        "print(repr(settings.SERVING_LATENCY_QUERY))",
        **traffic,
    )
    assert result.returncode == 0, result.stderr
    rps, latency = map(ast.literal_eval, result.stdout.strip().splitlines()[-2:])
    assert (metric in rps) if metric else rps == ""
    if metric.startswith("traefik"):
        assert 'service="$namespace-$service-http-80@kubernetesgateway"' in rps
        assert "traefik_service_request_duration_seconds_bucket" in latency
    if not metric:
        assert latency == ""


def test_a_notebook_host_needs_the_portal_to_guard_it() -> None:
    result = _manage("gpupaas.settings.dev", "check", NOTEBOOK_WILDCARD_HOST="*.nb.example.com")
    assert result.returncode != 0
    assert "PORTAL_URL" in result.stderr
    result = _manage("gpupaas.settings.dev", "check", NOTEBOOK_WILDCARD_HOST="nb.example.com")
    assert result.returncode != 0
    assert "must start with '*.'" in result.stderr
    result = _manage(
        "gpupaas.settings.dev",
        "shell",
        "-c",
        "from django.conf import settings; print(settings.NOTEBOOK_AUTH_URL)",
        NOTEBOOK_HOST="nb.example.com",
        PORTAL_URL="https://gpu.example.com/",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "https://gpu.example.com/notebooks/auth/"


@pytest.mark.parametrize(
    "environment",
    [
        {"K8S_PORTAL_SERVICE_ACCOUNT": "gpupaas/gpupaas"},
        {"K8S_PORTAL_TEAM_ROLE": "gpupaas-team"},
        {"K8S_PORTAL_SERVICE_ACCOUNT": "gpupaas", "K8S_PORTAL_TEAM_ROLE": "gpupaas-team"},
    ],
)
def test_half_a_portal_identity_fails_loudly(environment: dict[str, str]) -> None:
    result = _manage("gpupaas.settings.dev", "check", **environment)
    assert result.returncode != 0
    assert (
        "K8S_PORTAL_SERVICE_ACCOUNT (as namespace/name) and K8S_PORTAL_TEAM_ROLE" in result.stderr
    )
