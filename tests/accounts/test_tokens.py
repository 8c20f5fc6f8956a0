from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import core
from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_create
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def bearer(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def test_token_created_in_portal_is_shown_once_and_stored_hashed(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    response = client.post(
        "/accounts/tokens/", {"name": "laptop", "scopes": ["read"], "expiry": "30"}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    match = re.search(r'id="new-token"[^>]*>(gpp_[0-9a-f]{8}_[\w-]+)<', response.content.decode())
    assert match, "the new token is shown"
    plaintext = match.group(1)
    token = ApiToken.objects.get(user=cast.owner)
    assert token.digest == core.token_digest(plaintext)
    assert plaintext not in {token.digest, token.lookup, token.name}
    assert token.scopes == ["read"]
    assert token.expires_at is not None
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    again = client.get("/accounts/tokens/").content.decode()
    assert plaintext not in again
    assert f"gpp_{token.lookup}_…" in again


def test_new_token_comes_with_the_cli_configure_line_for_this_portal(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    response = client.post(
        "/accounts/tokens/", {"name": "laptop", "scopes": ["read"], "expiry": "30"}
    )
    page = response.content.decode()
    line = re.search(r'id="configure-command"[^>]*>([^<]*)<', page)
    assert line, "the configure line is shown"
    assert line.group(1) == "gpupaas configure --url http://testserver"
    assert "gpupaas configure" not in client.get("/accounts/tokens/").content.decode()


def test_token_form_errors_keep_what_was_typed(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    response = client.post("/accounts/tokens/", {"name": "ci pipeline", "expiry": "30"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "This field is required" in body
    assert 'value="ci pipeline"' in body
    assert not ApiToken.objects.exists()


def test_token_authenticates_api_and_records_last_use(cast: Cast) -> None:
    token, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["read"], expires_at=None
    )
    response = bearer(plaintext).get("/api/v1/me/")
    assert response.status_code == 200
    assert response.json()["username"] == "owner"
    assert [t["slug"] for t in response.json()["teams"]] == [cast.team.slug]
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_expired_token_is_refused(cast: Cast) -> None:
    token, plaintext = api_token_create(
        actor=cast.owner,
        name="t",
        scopes=["read"],
        expires_at=timezone.now() + timedelta(minutes=1),
    )
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(plaintext).get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json()["message"] == "The token is unknown, revoked or expired."


def test_revoked_token_is_refused(cast: Cast) -> None:
    token, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["write"], expires_at=None
    )
    assert bearer(plaintext).delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert bearer(plaintext).get("/api/v1/me/").status_code == 401


def test_read_token_cannot_write(cast: Cast) -> None:
    token, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["read"], expires_at=None
    )
    response = bearer(plaintext).delete(f"/api/v1/tokens/{token.pk}/")
    assert response.status_code == 403
    assert "read scope only" in response.json()["message"]
    token.refresh_from_db()
    assert token.revoked_at is None


def test_garbage_and_malformed_tokens_get_401(cast: Cast) -> None:
    assert bearer("gpp_00000000_nope").get("/api/v1/me/").status_code == 401
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer a b")
    assert client.get("/api/v1/me/").status_code == 401
    assert APIClient().get("/api/v1/me/").status_code in (401, 403)


def test_outsider_cannot_see_or_revoke_anothers_token(cast: Cast) -> None:
    token, _ = api_token_create(actor=cast.owner, name="t", scopes=["read"], expires_at=None)
    _, outsider_plain = api_token_create(
        actor=cast.outsider, name="o", scopes=["write"], expires_at=None
    )
    client = bearer(outsider_plain)
    assert client.get(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert client.delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    portal = Client()
    portal.force_login(cast.outsider)
    assert portal.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoke_in_portal(cast: Cast) -> None:
    token, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["read"], expires_at=None
    )
    portal = Client()
    portal.force_login(cast.owner)
    assert portal.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 302
    assert bearer(plaintext).get("/api/v1/me/").status_code == 401


def test_token_of_deactivated_user_is_refused(cast: Cast) -> None:
    _, plaintext = api_token_create(actor=cast.owner, name="t", scopes=["read"], expires_at=None)
    cast.owner.is_active = False
    cast.owner.save()
    assert bearer(plaintext).get("/api/v1/me/").status_code == 401
