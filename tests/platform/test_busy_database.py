"""A request that cannot get a database connection in time (every pooled connection of its
worker in use for DATABASE_POOL_TIMEOUT seconds) is answered 503 with Retry-After, in the
portal's HTML and the API's error shape; any other failure stays a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client
from psycopg_pool import PoolTimeout

from apps.web.views.errors import database_busy

pytestmark = pytest.mark.django_db


def pool_ran_out() -> OperationalError:
    """What Django raises when psycopg_pool's getconn times out (wrap_database_errors)."""
    try:
        try:
            raise PoolTimeout("couldn't get a connection after 10.00 sec")
        except PoolTimeout as exc:
            raise OperationalError(str(exc)) from exc
    except OperationalError as wrapped:
        return wrapped


def test_only_a_pool_timeout_counts_as_busy() -> None:
    assert database_busy(pool_ran_out())
    assert not database_busy(OperationalError("server closed the connection unexpectedly"))
    assert not database_busy(ValueError("a bug"))
    assert not database_busy(None)


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> dict[str, BaseException]:
    """Makes the session lookup (the first database read of any signed-in request) fail."""
    box: dict[str, BaseException] = {}

    def load(self: Any) -> Any:
        raise box["error"]

    monkeypatch.setattr("django.contrib.sessions.backends.db.SessionStore.load", load)
    return box


def test_the_portal_and_the_api_answer_503_when_the_database_is_busy(
    failing: dict[str, BaseException],
) -> None:
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "x" * 32
    failing["error"] = pool_ran_out()
    page = client.get("/")
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert "The portal is busy" in page.content.decode()
    api = client.get("/api/v1/workloads/")
    assert api.status_code == 503
    assert api["Retry-After"] == "5"
    assert api.json()["code"] == "unavailable"


def test_any_other_failure_is_still_a_server_error(failing: dict[str, BaseException]) -> None:
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "x" * 32
    failing["error"] = RuntimeError("a bug")
    assert client.get("/").status_code == 500
    api = client.get("/api/v1/workloads/")
    assert api.status_code == 500
    assert api.json()["code"] == "server_error"
