"""The PostgreSQL backend's health check: no round trip while the connection is idle, and a
connection the server has closed is found out before a request uses it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.db.backends.postgresql import base as django_base

from apps.common.db.postgresql.base import DatabaseWrapper
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def second() -> Iterator[DatabaseWrapper]:
    """A connection of its own, apart from the test's transaction."""
    wrapper = connections.create_connection("default")
    assert isinstance(wrapper, DatabaseWrapper)
    wrapper.ensure_connection()
    yield wrapper
    wrapper.close()


def test_settings_use_this_backend() -> None:
    assert isinstance(connections["default"], DatabaseWrapper)
    assert connection.vendor == "postgresql"


def test_an_idle_connection_is_usable_without_a_statement(
    second: DatabaseWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(django_base.DatabaseWrapper, "is_usable", lambda self: asked.append(1))
    assert second.is_usable()
    assert asked == []


def test_a_connection_the_server_closed_is_not_usable(second: DatabaseWrapper) -> None:
    pid = second.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        (terminated,) = cursor.fetchone()
    assert terminated
    wait_for(lambda: not second.is_usable(), timeout=10)


def test_a_closed_connection_is_not_usable(second: DatabaseWrapper) -> None:
    second.connection.close()
    assert not second.is_usable()
