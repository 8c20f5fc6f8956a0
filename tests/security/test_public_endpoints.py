"""Attacks on the endpoints open without signing in: /metrics read by anyone, /readyz telling
anonymous callers the database's host and port, the OpenAPI document rebuilt on every
request, and a rotating X-Forwarded-For escaping the per-address rate limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import OperationalError
from django.test import Client, RequestFactory
from drf_spectacular.generators import SchemaGenerator

from apps.api.schema import forget_schema
from apps.common import health as ops
from apps.common.http import client_ip, is_loopback
from apps.common.ratelimit import rate_limiter
from tests.plugins.cast import Cast
from tests.plugins.redis_server import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clear_of_minute_boundary")]

REPO_ROOT = Path(__file__).resolve().parents[2]
ELSEWHERE = "203.0.113.7"  # a caller on another host (TEST-NET-3)
DB_ERROR = 'connection to server at "10.20.30.40", port 6543 failed: Connection refused'


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    rate_limiter().reset()
    yield
    rate_limiter().reset()


# --- /metrics --------------------------------------------------------------------------------


def test_metrics_are_not_served_to_anonymous_callers_from_elsewhere(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    response = Client(REMOTE_ADDR=ELSEWHERE).get("/metrics")
    assert response.status_code == 404
    assert b"django_http" not in response.content


def test_metrics_are_not_served_for_a_spoofed_loopback_forwarded_for(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    settings.TRUSTED_PROXY_COUNT = 1
    response = Client(REMOTE_ADDR=ELSEWHERE, HTTP_X_FORWARDED_FOR="127.0.0.1").get("/metrics")
    assert response.status_code == 404


def test_metrics_are_not_served_to_the_world_through_a_proxy_on_this_host(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    settings.TRUSTED_PROXY_COUNT = 1
    response = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=ELSEWHERE).get("/metrics")
    assert response.status_code == 404


def test_metrics_without_a_token_set_answer_callers_on_this_host(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    response = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
    assert response.status_code == 200
    assert b"django_http_requests_total_by_method_total" in response.content


def test_metrics_need_the_token_when_one_is_set_even_from_this_host(settings: Any) -> None:
    settings.METRICS_TOKEN = "metrics-secret-0123456789"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": "Basic x"}):
        for address in ("127.0.0.1", ELSEWHERE):
            response = Client(REMOTE_ADDR=address).get("/metrics", **headers)
            assert response.status_code == 401, (address, headers)
            assert response["WWW-Authenticate"].startswith("Bearer")
            assert b"django_http" not in response.content
    response = Client(REMOTE_ADDR=ELSEWHERE).get(
        "/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret-0123456789"
    )
    assert response.status_code == 200
    assert b"# TYPE" in response.content


# --- /readyz ---------------------------------------------------------------------------------


@pytest.fixture
def broken_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """The database check fails with the driver's message, which names host and port."""

    class BrokenConnection:
        vendor = "postgresql"

        def cursor(self) -> Any:
            raise OperationalError(DB_ERROR)

    # Only the check's connection: sessions and the rest of the request still work.
    monkeypatch.setattr(ops, "connection", BrokenConnection())


def test_readyz_tells_anonymous_callers_from_elsewhere_only_the_status(
    settings: Any, broken_database: None
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = Client(REMOTE_ADDR=ELSEWHERE).get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


def test_readyz_never_shows_the_database_host_or_port(
    settings: Any, broken_database: None, cast: Cast
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    admin = Client(REMOTE_ADDR=ELSEWHERE)
    admin.force_login(cast.admin)
    for client in (Client(REMOTE_ADDR="127.0.0.1"), admin):
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["checks"]["database"]["ok"] is False
        assert body["checks"]["database"]["detail"].startswith("OperationalError")
        text = response.content.decode()
        for secret in ("10.20.30.40", "6543", "127.0.0.1", str(settings.REDIS_URL)):
            assert secret not in text


def test_readyz_details_are_for_admins_and_this_host_not_for_other_users(
    settings: Any, cast: Cast
) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    member = Client(REMOTE_ADDR=ELSEWHERE)
    member.force_login(cast.owner)
    assert member.get("/readyz").json() == {"status": "unavailable"}
    admin = Client(REMOTE_ADDR=ELSEWHERE)
    admin.force_login(cast.admin)
    assert set(admin.get("/readyz").json()) == {"status", "checks", "worker"}
    assert set(Client(REMOTE_ADDR="::1").get("/readyz").json()) == {"status", "checks", "worker"}


# --- the OpenAPI document --------------------------------------------------------------------


def test_schema_is_built_once_per_process_and_served_with_an_etag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forget_schema()
    calls: list[int] = []
    original = SchemaGenerator.get_schema

    def counting(self: SchemaGenerator, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counting)
    try:
        first = Client().get("/api/schema/")
        second = Client().get("/api/schema/")
        assert first.status_code == second.status_code == 200
        assert first.content == second.content
        assert len(calls) == 1
        assert yaml.safe_load(first.content)["openapi"].startswith("3.")
        etag = first["ETag"]
        assert etag == second["ETag"] and etag.startswith('"')
        revalidated = Client().get("/api/schema/", HTTP_IF_NONE_MATCH=etag)
        assert revalidated.status_code == 304 and revalidated.content == b""
        # Queries that cannot change the document do not make the process build another.
        for query in ("?lang=de", "?version=junk", "?lang=xx&version=2"):
            assert Client().get("/api/schema/" + query).content == first.content
        assert len(calls) == 1
        as_json = Client().get("/api/schema/?format=json")
        assert as_json["Content-Type"].startswith("application/vnd.oai.openapi+json")
        assert len(calls) == 2
    finally:
        forget_schema()


# --- X-Forwarded-For and the per-address rate limit --------------------------------------------


def test_rotating_forwarded_for_does_not_escape_the_per_address_limit_behind_one_proxy(
    settings: Any,
) -> None:
    """Behind one proxy that appends the address it saw: whatever the client prepends, the
    key is that address, and the fourth request of three allowed is refused."""
    settings.TRUSTED_PROXY_COUNT = 1
    settings.API_RATE_LIMIT_PER_ADDRESS = "3/min"
    codes = []
    for n in range(6):
        spoofed = f"10.0.{n}.1, 192.0.2.{n}"  # what the client sent, rotating
        client = Client(REMOTE_ADDR="10.9.9.9", HTTP_X_FORWARDED_FOR=f"{spoofed}, {ELSEWHERE}")
        codes.append(client.get("/api/schema/").status_code)
    assert codes == [200, 200, 200, 429, 429, 429]


def test_rotating_forwarded_for_does_not_escape_the_per_address_limit_without_a_proxy(
    settings: Any,
) -> None:
    """The port published straight to clients (docker-compose.yml): no header is trusted."""
    settings.TRUSTED_PROXY_COUNT = 0
    settings.API_RATE_LIMIT_PER_ADDRESS = "3/min"
    codes = [
        Client(REMOTE_ADDR=ELSEWHERE, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
        .get("/api/schema/")
        .status_code
        for n in range(5)
    ]
    assert codes == [200, 200, 200, 429, 429]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_client_ip_is_the_nth_entry_from_the_right_whatever_the_client_prepends(
    settings: Any, hops: int
) -> None:
    settings.TRUSTED_PROXY_COUNT = hops
    appended = ["198.51.100.1", "10.0.0.2", "10.0.0.3"][:hops]  # by the proxies, in order
    seen = set()
    for prefix in ("", "1.2.3.4", "1.2.3.4, 5.6.7.8", "unknown, ::1, 127.0.0.1"):
        header = ", ".join([p for p in [prefix] if p] + appended)
        request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=header)
        seen.add(client_ip(request))
        assert not is_loopback(request)
    assert seen == {"198.51.100.1"}
    # Fewer entries than proxies: the request did not come through them; the TCP peer counts.
    short = RequestFactory().get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR="")
    assert client_ip(short) == "10.0.0.9"
    # An entry that is not an address (a NUL, a name) was not written by a proxy: the TCP
    # peer counts, and nothing unparseable reaches the audit log's address column.
    for junk in ("10.0.0.\x001", "proxy.internal", "unknown"):
        header = ", ".join([junk, *appended[1:]])
        odd = RequestFactory().get("/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR=header)
        assert client_ip(odd) == "10.0.0.9", junk


def test_compose_trusts_no_proxy_while_the_port_is_published_to_clients() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    web = compose["services"]["web"]
    env = compose["x-portal"]["environment"]
    published_to_all = any(not str(p).startswith("127.0.0.1:") for p in web.get("ports", []))
    default = str(env["TRUSTED_PROXY_COUNT"]).rsplit(":-", 1)[-1].rstrip("}")
    if published_to_all:
        assert default == "0"
