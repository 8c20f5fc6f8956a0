"""The attacks on tokens and on the admin's sign-in that were shown to work, one test each:
every test here failed before the fix."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, User
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from tests.plugins.cast import Cast
from tests.plugins.redis_server import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clear_of_minute_boundary")]

PASSWORD = "correct horse battery staple"


def bearer(plaintext: str, address: str = "127.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def mint_child(parent_plaintext: str, **body: Any) -> Any:
    """Create a token through the API, authenticated with another token."""
    return bearer(parent_plaintext).post(
        "/api/v1/tokens/", {"name": "child", "scopes": ["read"], **body}, format="json"
    )


# --- tokens made with tokens -------------------------------------------------------------------


def test_child_token_cannot_outlive_parent(cast: Cast) -> None:
    parent, plaintext = api_token_create(
        actor=cast.owner,
        name="expires tomorrow",
        scopes=["write"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    # Asked for without an expiry, the child ends when its parent does: never "never".
    response = mint_child(plaintext)
    assert response.status_code == 201, response.json()
    child = ApiToken.objects.get(pk=response.json()["id"])
    assert child.parent == parent
    assert child.expires_at == parent.expires_at
    assert response.json()["parent"] == parent.pk
    # Asked for beyond it, the child is refused with a reason, not quietly shortened.
    refused = mint_child(plaintext, expires_in_days=30)
    assert refused.status_code == 400
    assert "cannot outlive it" in refused.json()["fields"]["expires_at"][0]
    assert ApiToken.objects.filter(user=cast.owner).count() == 2


def test_child_token_dies_with_revoked_parent(cast: Cast) -> None:
    parent, plaintext = api_token_create(
        actor=cast.owner, name="parent", scopes=["write"], expires_at=None
    )
    child_plain = mint_child(plaintext).json()["token"]
    assert bearer(child_plain).get("/api/v1/me/").status_code == 200
    assert bearer(plaintext).delete(f"/api/v1/tokens/{parent.pk}/").status_code == 204
    assert bearer(child_plain).get("/api/v1/me/").status_code == 401
    child = ApiToken.objects.get(parent=parent)
    assert child.revoked_at is not None
    assert AuditEvent.objects.filter(action="token.revoke", object_id=str(child.pk)).exists()


def test_child_token_dies_with_parent_revoked_or_expired_behind_the_service(
    cast: Cast,
) -> None:
    """Authentication walks the chain, so a parent revoked or run out by any path (a race with
    a revocation, a row changed by hand) takes its children with it."""
    parent, plaintext = api_token_create(
        actor=cast.owner, name="parent", scopes=["write"], expires_at=None
    )
    child_plain = mint_child(plaintext, scopes=["write"]).json()["token"]
    grandchild_plain = mint_child(child_plain).json()["token"]
    assert bearer(grandchild_plain).get("/api/v1/me/").status_code == 200
    ApiToken.objects.filter(pk=parent.pk).update(revoked_at=timezone.now())
    assert bearer(child_plain).get("/api/v1/me/").status_code == 401
    assert bearer(grandchild_plain).get("/api/v1/me/").status_code == 401
    ApiToken.objects.filter(pk=parent.pk).update(
        revoked_at=None, expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert bearer(grandchild_plain).get("/api/v1/me/").status_code == 401


def test_child_token_cannot_out_scope_parent(cast: Cast) -> None:
    parent, _ = api_token_create(actor=cast.owner, name="read", scopes=["read"], expires_at=None)
    with pytest.raises(ValidationError, match="cannot allow more than it"):
        api_token_create(
            actor=cast.owner, name="write", scopes=["write"], expires_at=None, parent=parent
        )


# --- rate limits -------------------------------------------------------------------------------


def test_second_token_of_same_user_shares_rate_limit(cast: Cast, settings: Any) -> None:
    settings.API_RATE_LIMIT = "3/min"
    _, first = api_token_create(actor=cast.owner, name="a", scopes=["read"], expires_at=None)
    _, second = api_token_create(actor=cast.owner, name="b", scopes=["read"], expires_at=None)
    assert [bearer(first).get("/api/v1/me/").status_code for _ in range(4)] == [200] * 3 + [429]
    response = bearer(second).get("/api/v1/me/")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    session = APIClient()
    session.force_login(cast.owner)
    assert session.get("/api/v1/me/").status_code == 429
    _, teammate = api_token_create(actor=cast.teammate, name="t", scopes=["read"], expires_at=None)
    assert bearer(teammate).get("/api/v1/me/").status_code == 200


def test_one_address_shares_a_budget_whoever_signs_in(cast: Cast, settings: Any) -> None:
    settings.API_RATE_LIMIT_PER_ADDRESS = "3/min"
    tokens = [
        api_token_create(actor=user, name="t", scopes=["read"], expires_at=None)[1]
        for user in (cast.owner, cast.teammate, cast.lead, cast.outsider)
    ]
    codes = [bearer(t, "10.0.0.7").get("/api/v1/me/").status_code for t in tokens]
    assert codes == [200, 200, 200, 429]
    assert bearer(tokens[3], "10.0.0.8").get("/api/v1/me/").status_code == 200


def test_bogus_tokens_get_429_after_failures(cast: Cast, settings: Any) -> None:
    settings.API_AUTH_FAILURE_LIMIT = "20/min"
    bogus = bearer("gpp_00000000_guess", "10.0.0.9")
    malformed = APIClient(REMOTE_ADDR="10.0.0.9", HTTP_AUTHORIZATION="Bearer a b")
    codes = [malformed.get("/api/v1/me/").status_code for _ in range(5)]
    codes += [bogus.get("/api/v1/me/").status_code for _ in range(25)]
    assert codes == [401] * 20 + [429] * 10
    refused = bogus.get("/api/v1/me/")
    assert refused.json()["code"] == "throttled"
    assert "failed authentications" in refused.json()["message"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    # The address's failures stay throttled, but a valid token from it still works (one
    # address may be everyone's behind a proxy).
    _, good = api_token_create(actor=cast.owner, name="t", scopes=["read"], expires_at=None)
    assert bearer(good, "10.0.0.9").get("/api/v1/me/").status_code == 200
    assert bearer("gpp_11111111_guess", "10.0.0.9").get("/api/v1/me/").status_code == 429
    # Other addresses are not affected.
    assert bearer(good, "10.0.0.10").get("/api/v1/me/").status_code == 200
    assert bearer("gpp_00000000_guess", "10.0.0.10").get("/api/v1/me/").status_code == 401


# --- the limiter's store down ------------------------------------------------------------------


def test_limiter_store_down_fails_closed_for_writes(cast: Cast, settings: Any) -> None:
    settings.API_RATE_LIMIT_STORE = "redis"
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    _, plaintext = api_token_create(actor=cast.owner, name="t", scopes=["write"], expires_at=None)
    client = bearer(plaintext)
    assert client.get("/api/v1/me/").status_code == 200
    response = client.post("/api/v1/tokens/", {"name": "x", "scopes": ["read"]}, format="json")
    assert response.status_code == 503
    assert response.json()["code"] == "unavailable"
    assert "rate-limit store cannot be reached" in response.json()["message"]
    assert ApiToken.objects.filter(user=cast.owner).count() == 1
    settings.API_RATE_LIMIT_FAIL_CLOSED_WRITES = False
    response = client.post("/api/v1/tokens/", {"name": "x", "scopes": ["read"]}, format="json")
    assert response.status_code == 201


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Redis server of this test's own, which the test may stop."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (Debian package redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"redis-server did not start on port {port}")
            time.sleep(0.05)
    yield url, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.mark.redis
def test_limiter_fails_closed_for_writes_when_redis_stops(
    cast: Cast, settings: Any, own_redis: tuple[str, subprocess.Popen[bytes]]
) -> None:
    url, server = own_redis
    settings.API_RATE_LIMIT_STORE = "redis"
    settings.REDIS_URL = url
    settings.API_RATE_LIMIT = "2/min"
    _, plaintext = api_token_create(actor=cast.owner, name="t", scopes=["write"], expires_at=None)
    client = bearer(plaintext)
    assert [client.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 429]
    server.terminate()
    server.wait(timeout=10)
    assert client.get("/api/v1/me/").status_code == 200  # reads pass, uncounted
    response = client.delete(f"/api/v1/tokens/{ApiToken.objects.get().pk}/")
    assert response.status_code == 503
    assert ApiToken.objects.get().revoked_at is None


# --- the admin's password sign-in --------------------------------------------------------------


@pytest.fixture
def staff(cast: Cast) -> User:
    cast.admin.set_password(PASSWORD)
    cast.admin.save()
    return cast.admin


def admin_login(username: str, password: str, address: str = "127.0.0.1") -> Any:
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}
    )
    response.signed_in = "_auth_user_id" in client.session
    return response


def test_admin_login_locks_out_after_repeated_failures(staff: User, settings: Any) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 5
    settings.ADMIN_LOGIN_LOCKOUT_SECONDS = 900
    for _ in range(5):
        wrong = admin_login("admin", "guess")
        assert wrong.status_code == 200
        assert not wrong.signed_in
    locked = admin_login("admin", PASSWORD)
    assert locked.status_code == 429
    assert not locked.signed_in
    assert "Too many failed sign-ins" in locked.content.decode()
    assert 1 <= int(locked["Retry-After"]) <= 900
    # The failures lock the username at that address only: from another, the right password
    # still signs in (tests/security/test_lockout.py).
    assert admin_login("admin", PASSWORD, "10.1.1.1").signed_in
    assert AuditEvent.objects.filter(action="auth.admin_login_failed").count() == 5
    lockout = AuditEvent.objects.get(action="auth.admin_lockout")
    assert lockout.details["username"] == "admin"
    assert lockout.source_ip == "127.0.0.1"


def test_admin_login_locks_out_an_address_trying_many_usernames(staff: User, settings: Any) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 3
    for name in ("root", "administrator", "ops"):
        assert admin_login(name, "guess", "10.2.2.2").status_code == 200
    assert admin_login("admin", PASSWORD, "10.2.2.2").status_code == 429
    signed_in = admin_login("admin", PASSWORD, "10.3.3.3")
    assert signed_in.status_code == 302
    assert signed_in.signed_in


def test_admin_lockout_ends_after_its_window(staff: User, settings: Any) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 2
    settings.ADMIN_LOGIN_LOCKOUT_SECONDS = 1
    admin_login("admin", "guess")
    admin_login("admin", "guess")
    assert admin_login("admin", PASSWORD).status_code == 429
    time.sleep(1.2)
    assert admin_login("admin", PASSWORD).signed_in
    event = AuditEvent.objects.get(action="auth.admin_password_login")
    assert event.details == {"break_glass": False}


def test_admin_password_login_refused_when_sso_on(staff: User, settings: Any) -> None:
    settings.OIDC_ENABLED = True
    settings.ADMIN_PASSWORD_LOGIN = False
    page = Client().get("/admin/login/?next=/admin/auth/group/")
    assert page.status_code == 302
    assert page["Location"] == "/oidc/authenticate/?next=%2Fadmin%2Fauth%2Fgroup%2F"
    refused = admin_login("admin", PASSWORD)
    assert refused.status_code == 403
    assert not refused.signed_in
    assert "Password sign-in is turned off" in refused.content.decode()
    assert 'href="/oidc/authenticate/?next=%2Fadmin%2F"' in refused.content.decode()
    # A signed-in person who is not an admin is told so, not sent round the provider again.
    member = Client()
    member.force_login(User.objects.get(username="owner"))
    assert member.get("/admin/login/?next=/admin/").status_code == 403


def test_admin_password_login_break_glass_switch(staff: User, settings: Any) -> None:
    settings.OIDC_ENABLED = True
    settings.ADMIN_PASSWORD_LOGIN = True
    settings.ADMIN_LOGIN_MAX_FAILURES = 2
    assert Client().get("/admin/login/").status_code == 200
    signed_in = admin_login("admin", PASSWORD)
    assert signed_in.status_code == 302
    assert signed_in.signed_in
    event = AuditEvent.objects.get(action="auth.admin_password_login")
    assert event.details == {"break_glass": True}
    # Still locked out after repeated failures.
    admin_login("admin", "guess")
    admin_login("admin", "guess")
    assert admin_login("admin", PASSWORD).status_code == 429


def test_admin_login_refused_while_limiter_store_down(staff: User, settings: Any) -> None:
    settings.API_RATE_LIMIT_STORE = "redis"
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    refused = admin_login("admin", PASSWORD)
    assert refused.status_code == 503
    assert not refused.signed_in
    assert "Password sign-in is unavailable" in refused.content.decode()
