from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.common import health as ops
from tests.plugins.redis_server import free_port

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_dependencies(settings: Any) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok\n"


@pytest.mark.redis
def test_readyz_ok_with_database_and_redis(redis_settings: str) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"] == {"ok": True, "detail": "postgresql"}
    assert body["checks"]["redis"]["ok"] is True


def test_readyz_says_redis_failed(settings: Any) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is False
    assert "ConnectionError" in body["checks"]["redis"]["detail"]


@pytest.mark.redis
def test_readyz_says_database_failed(redis_settings: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> ops.Check:
        return ops.Check("database", False, "OperationalError: connection refused")

    # The database check itself is exercised above; here only its failure path is forced.
    monkeypatch.setattr(ops, "check_database", broken)
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["ok"] is False
    assert response.json()["checks"]["redis"]["ok"] is True


def test_metrics_expose_prometheus_text() -> None:
    client = Client()
    client.get("/healthz")
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert "django_http_requests_total_by_method_total" in text
    assert "# TYPE" in text
