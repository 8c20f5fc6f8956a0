"""Lockout as denial of service: 20 bad tokens from one address locked a valid token from that
address out for 60 s, and behind a proxy with TRUSTED_PROXY_COUNT=0 that address is everyone's;
5 wrong passwords locked the break-glass admin out for 15 minutes. Failures are now counted per
token (or username) and per address in separate buckets: a valid credential still works, the
failures are still throttled, and an operator can always sign the break-glass admin in."""

from __future__ import annotations

from io import StringIO
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clear_of_minute_boundary")]

PASSWORD = "correct horse battery staple"
PROXY = "10.0.0.1"


def bearer(plaintext: str, address: str = "127.0.0.1", forwarded: str = "") -> APIClient:
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    client = APIClient(REMOTE_ADDR=address, **extra)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def _token(user: User) -> str:
    return api_token_create(actor=user, name="t", scopes=["read"], expires_at=None)[1]


def test_valid_token_still_works_after_twenty_bad_tokens_from_its_address(
    cast: Cast, settings: Any
) -> None:
    settings.API_AUTH_FAILURE_LIMIT = "20/min"
    settings.TRUSTED_PROXY_COUNT = 0  # behind a proxy: every caller has the proxy's address
    codes = [bearer(f"gpp_{i:08x}_guess", PROXY).get("/api/v1/me/").status_code for i in range(25)]
    assert codes == [401] * 20 + [429] * 5  # the failures are still throttled
    assert bearer(_token(cast.owner), PROXY).get("/api/v1/me/").status_code == 200


def test_guessing_one_tokens_secret_is_throttled_per_token(cast: Cast, settings: Any) -> None:
    settings.API_AUTH_FAILURE_LIMIT = "20/min"
    good = _token(cast.owner)
    lookup = good.split("_")[1]
    codes = [
        bearer(f"gpp_{lookup}_wrong{i}", "10.4.4.4").get("/api/v1/me/").status_code
        for i in range(22)
    ]
    assert codes == [401] * 20 + [429] * 2
    # The owner, elsewhere, is not refused for the guesser's failures.
    assert bearer(good, "10.5.5.5").get("/api/v1/me/").status_code == 200


def test_one_clients_failures_through_a_trusted_proxy_do_not_lock_out_another(
    cast: Cast, settings: Any
) -> None:
    settings.API_AUTH_FAILURE_LIMIT = "20/min"
    settings.TRUSTED_PROXY_COUNT = 1
    for i in range(21):
        bearer(f"gpp_{i:08x}_guess", PROXY, "198.51.100.7").get("/api/v1/me/")
    assert bearer("gpp_ffffffff_x", PROXY, "198.51.100.7").get("/api/v1/me/").status_code == 429
    assert bearer("gpp_ffffffff_x", PROXY, "198.51.100.8").get("/api/v1/me/").status_code == 401
    good = _token(cast.owner)
    assert bearer(good, PROXY, "198.51.100.8").get("/api/v1/me/").status_code == 200


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


def test_attacker_failures_do_not_lock_the_break_glass_admin_out_from_elsewhere(
    staff: User, settings: Any
) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 5
    settings.ADMIN_LOGIN_LOCKOUT_SECONDS = 900
    for _ in range(5):
        assert not admin_login("admin", "guess", "203.0.113.66").signed_in
    # The attacker's address is locked, for the right password too …
    assert admin_login("admin", PASSWORD, "203.0.113.66").status_code == 429
    # … the admin, from their own address, is not.
    assert admin_login("admin", PASSWORD, "10.1.1.1").signed_in


def test_operator_can_sign_the_break_glass_admin_in_while_locked_out(
    staff: User, settings: Any
) -> None:
    settings.ADMIN_LOGIN_MAX_FAILURES = 2
    settings.TRUSTED_PROXY_COUNT = 0
    for _ in range(3):
        admin_login("admin", "guess", PROXY)
    assert admin_login("admin", PASSWORD, PROXY).status_code == 429
    out = StringIO()
    call_command("admin_signin_link", "admin", stdout=out)
    url = urlsplit(out.getvalue().strip().splitlines()[-1])
    client = Client(REMOTE_ADDR=PROXY)
    response = client.get(url.path)
    assert response.status_code == 302
    assert "_auth_user_id" in client.session
    assert client.get("/admin/").status_code == 200
    event = AuditEvent.objects.get(action="auth.admin_password_login")
    assert event.details == {"break_glass": True, "signin_link": True}
    # The link works once.
    again = Client(REMOTE_ADDR=PROXY)
    assert again.get(url.path).status_code == 400
    assert "_auth_user_id" not in again.session


def test_sign_in_link_is_refused_when_tampered_or_for_a_non_admin(cast: Cast) -> None:
    out = StringIO()
    call_command("admin_signin_link", "admin", stdout=out)
    path = urlsplit(out.getvalue().strip().splitlines()[-1]).path
    assert Client().get(path[:-3] + "xx/").status_code == 400
    with pytest.raises(Exception, match="not an active staff"):
        call_command("admin_signin_link", "owner", stdout=StringIO())
