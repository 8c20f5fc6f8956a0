"""Rate limits (429 with Retry-After), oversized bodies (413), sessions with CSRF."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client as DjangoClient
from rest_framework.test import APIClient

from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clear_of_minute_boundary")]


@pytest.fixture(autouse=True)
def whole_minute() -> Iterator[None]:
    """The per-minute limits count in windows aligned to the minute, weighing the previous
    one as the new one begins: a few requests sent across a boundary may all pass. Start the
    counted requests well inside a minute, so each test's requests share one window."""
    while time.time() % 60 > 45:
        time.sleep(0.5)
    yield


def test_token_over_its_rate_gets_429_with_retry_after(
    cast: Cast, api: Client, settings: Any
) -> None:
    settings.API_RATE_LIMIT = "3/min"
    client = api(cast.owner, ("read",))
    assert [client.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 200]
    response = client.get("/api/v1/me/")
    assert response.status_code == 429
    assert response.json()["code"] == "throttled"
    assert 1 <= int(response["Retry-After"]) <= 60


def test_rate_limit_is_per_user(cast: Cast, api: Client, settings: Any) -> None:
    settings.API_RATE_LIMIT = "2/min"
    first, second = api(cast.owner, ("read",)), api(cast.owner, ("read",))
    someone_else = api(cast.teammate, ("read",))
    for _ in range(2):
        first.get("/api/v1/me/")
    assert first.get("/api/v1/me/").status_code == 429
    assert second.get("/api/v1/me/").status_code == 429
    assert someone_else.get("/api/v1/me/").status_code == 200


def test_sessions_are_limited_per_user(cast: Cast, settings: Any) -> None:
    settings.API_RATE_LIMIT = "2/min"
    browser = APIClient()
    browser.force_login(cast.owner)
    assert [browser.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 429]


def test_oversized_body_is_refused_with_413_before_parsing(
    cast: Cast, api: Client, settings: Any
) -> None:
    settings.API_MAX_BODY_BYTES = 2048
    body = json.dumps({"kind": "training", "name": "x" * 4000})
    response = api(cast.owner).post("/api/v1/workloads/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "code": "too_large",
        "message": "The request body is larger than 2048 bytes.",
        "fields": {},
    }
    assert not Workload.objects.exists()


def test_body_limit_leaves_the_portal_alone(cast: Cast, settings: Any) -> None:
    settings.API_MAX_BODY_BYTES = 1024
    portal = DjangoClient()
    portal.force_login(cast.owner)
    response = portal.post("/accounts/tokens/", {"name": "x" * 2000, "scopes": ["read"]})
    assert response.status_code != 413


def test_session_write_needs_the_csrf_token(cast: Cast) -> None:
    browser = DjangoClient(enforce_csrf_checks=True)
    browser.force_login(cast.owner)
    refused = browser.post("/api/v1/tokens/", {"name": "t", "scopes": ["read"]}, "application/json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["message"]
    browser.get("/accounts/tokens/")  # the portal page sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    accepted = browser.post(
        "/api/v1/tokens/",
        {"name": "t", "scopes": ["read"]},
        "application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert accepted.status_code == 201


def test_bearer_token_needs_no_csrf(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    client.enforce_csrf_checks = True  # type: ignore[attr-defined]
    response = client.post("/api/v1/tokens/", {"name": "t", "scopes": ["read"]}, format="json")
    assert response.status_code == 201


def test_unknown_api_url_answers_in_the_error_shape(cast: Cast, api: Client) -> None:
    response = api(cast.owner).get("/api/v1/workloads/not-a-number/events/")
    assert response.status_code == 404
    assert response.json() == {"code": "not_found", "message": "Not found.", "fields": {}}


@pytest.mark.parametrize(
    "cookie", ["ab\x00cdefghijkl", "abcdefgh\x00", "ABCDEFGH;ij", "é" * 12, "x" * 41]
)
def test_a_session_cookie_that_cannot_be_a_key_reads_as_signed_out(
    cast: Cast, api: Client, cookie: str
) -> None:
    """A NUL in the cookie once reached PostgreSQL and answered 500 (found by the schema fuzz
    pass); any cookie the session store could not have made now reads as no session."""
    anonymous = DjangoClient()
    anonymous.cookies["sessionid"] = cookie
    assert anonymous.get("/api/v1/me/").status_code == 401
    assert anonymous.post("/api/v1/workloads/null/clone/").status_code == 404
    assert anonymous.get("/workloads/").status_code == 302  # to the sign-in page
    # With a token beside it, the token is what counts.
    client = api(cast.owner)
    client.cookies["sessionid"] = cookie
    assert client.get("/api/v1/me/").status_code == 200


def test_a_real_session_still_signs_in(cast: Cast) -> None:
    browser = DjangoClient()
    browser.force_login(cast.owner)
    assert browser.get("/api/v1/me/").status_code == 200


def test_nul_in_the_url_is_refused_before_it_reaches_the_database(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    for path in ("/api/v1/quotas/?team=a%00b", "/api/v1/gpu-classes/a%00b/"):
        response = client.get(path)
        assert response.status_code == 400, path
        assert response.json()["code"] == "invalid"
