"""The rules of tokens: lifetime, scopes of tokens made with tokens, how many one person may
hold, and revocation down the family. The pure rules on plain data, then the service, the API
and the portal, which must agree because they share the service."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts import core
from apps.accounts.models import ApiToken
from apps.accounts.services import api_token_create, api_token_revoke
from apps.web.forms.accounts import expiry_choices
from tests.plugins.cast import Cast

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


# --- pure rules --------------------------------------------------------------------------------


def test_no_expiry_asked_gets_the_longest_allowed() -> None:
    assert core.token_expiry(requested=None, now=NOW, max_lifetime_days=365) == NOW + timedelta(
        days=365
    )
    tomorrow = NOW + timedelta(days=1)
    assert (
        core.token_expiry(requested=None, now=NOW, max_lifetime_days=365, parent_ends_at=tomorrow)
        == tomorrow
    )


def test_never_expires_only_without_maximum_and_without_mortal_parent() -> None:
    assert core.token_expiry(requested=None, now=NOW, max_lifetime_days=0) is None
    tomorrow = NOW + timedelta(days=1)
    assert (
        core.token_expiry(requested=None, now=NOW, max_lifetime_days=0, parent_ends_at=tomorrow)
        == tomorrow
    )


def test_expiry_within_the_limits_is_kept() -> None:
    asked = NOW + timedelta(days=30)
    assert core.token_expiry(requested=asked, now=NOW, max_lifetime_days=365) == asked
    assert core.token_expiry(requested=asked, now=NOW, max_lifetime_days=0) == asked


@pytest.mark.parametrize(
    ("asked", "max_days", "parent_ends_at", "message"),
    [
        (NOW, 365, None, "must be in the future"),
        (NOW + timedelta(days=366), 365, None, "at most 365 days"),
        (NOW + timedelta(days=2), 365, NOW + timedelta(days=1), "cannot outlive it"),
        (NOW + timedelta(days=2), 0, NOW + timedelta(days=1), "cannot outlive it"),
        (NOW + timedelta(days=40), 30, NOW + timedelta(days=90), "at most 30 days"),
    ],
)
def test_expiry_beyond_the_limits_is_refused_with_the_reason(
    asked: datetime, max_days: int, parent_ends_at: datetime | None, message: str
) -> None:
    with pytest.raises(core.TokenRuleError, match=message) as caught:
        core.token_expiry(
            requested=asked, now=NOW, max_lifetime_days=max_days, parent_ends_at=parent_ends_at
        )
    assert caught.value.field == "expires_at"


def test_lifetime_end_is_the_sooner_of_expiry_and_maximum() -> None:
    created = NOW - timedelta(days=10)
    assert core.token_lifetime_end(
        created_at=created, expires_at=None, max_lifetime_days=30
    ) == created + timedelta(days=30)
    assert core.token_lifetime_end(created_at=created, expires_at=NOW, max_lifetime_days=30) == NOW
    assert core.token_lifetime_end(created_at=created, expires_at=None, max_lifetime_days=0) is None


@pytest.mark.parametrize(
    ("scopes", "parent", "within"),
    [
        (["read"], ["read"], True),
        (["read"], ["write"], True),
        (["read", "write"], ["write"], True),
        (["write"], ["read"], False),
        (["read", "write"], ["read"], False),
        (["admin"], ["read", "write"], False),
    ],
)
def test_child_scopes_must_allow_no_more_than_the_parent(
    scopes: list[str], parent: list[str], within: bool
) -> None:
    assert core.token_scopes_within(scopes, parent) is within


# --- the service, the API and the portal -------------------------------------------------------


def bearer(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


@pytest.mark.django_db
def test_token_without_expiry_gets_the_maximum_lifetime(cast: Cast, settings: Any) -> None:
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 30
    token, _ = api_token_create(actor=cast.owner, name="t", scopes=["read"], expires_at=None)
    assert token.expires_at is not None
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)


@pytest.mark.django_db
def test_api_refuses_a_lifetime_beyond_the_maximum(cast: Cast, settings: Any) -> None:
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 30
    _, plaintext = api_token_create(actor=cast.owner, name="t", scopes=["write"], expires_at=None)
    response = bearer(plaintext).post(
        "/api/v1/tokens/",
        {"name": "long", "scopes": ["read"], "expires_in_days": 31},
        format="json",
    )
    assert response.status_code == 400
    assert "Tokens may live at most 30 days" in response.json()["message"]


@pytest.mark.django_db
def test_never_expiring_tokens_exist_only_with_no_maximum(cast: Cast, settings: Any) -> None:
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 0
    token, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["write"], expires_at=None
    )
    assert token.expires_at is None
    response = bearer(plaintext).post(
        "/api/v1/tokens/", {"name": "child", "scopes": ["read"]}, format="json"
    )
    assert response.json()["expires_at"] is None


@pytest.mark.django_db
def test_token_older_than_the_maximum_stops_working(cast: Cast, settings: Any) -> None:
    """Lowering API_TOKEN_MAX_LIFETIME_DAYS reaches tokens that exist, never-expiring ones too."""
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 0
    token, plaintext = api_token_create(
        actor=cast.owner, name="old", scopes=["read"], expires_at=None
    )
    ApiToken.objects.filter(pk=token.pk).update(created_at=timezone.now() - timedelta(days=100))
    assert bearer(plaintext).get("/api/v1/me/").status_code == 200
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 90
    assert bearer(plaintext).get("/api/v1/me/").status_code == 401
    token.refresh_from_db()
    assert not token.is_active()


@pytest.mark.django_db
def test_per_user_token_cap(cast: Cast, settings: Any) -> None:
    settings.API_TOKEN_MAX_PER_USER = 3
    first, plaintext = api_token_create(
        actor=cast.owner, name="t", scopes=["write"], expires_at=None
    )
    api_token_create(actor=cast.owner, name="t2", scopes=["read"], expires_at=None)
    expired, _ = api_token_create(actor=cast.owner, name="t3", scopes=["read"], expires_at=None)
    ApiToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    # Expired and revoked tokens do not count.
    api_token_create(actor=cast.owner, name="t4", scopes=["read"], expires_at=None)
    response = bearer(plaintext).post(
        "/api/v1/tokens/", {"name": "one too many", "scopes": ["read"]}, format="json"
    )
    assert response.status_code == 400
    assert "3 live tokens, the most one person may hold (3)" in response.json()["message"]
    portal = Client()
    portal.force_login(cast.owner)
    page = portal.post("/accounts/tokens/", {"name": "x", "scopes": ["read"], "expiry": "30"})
    assert page.status_code == 400
    assert "the most one person may hold" in page.content.decode()
    # Another person has their own allowance.
    api_token_create(actor=cast.teammate, name="t", scopes=["read"], expires_at=None)
    api_token_revoke(actor=cast.owner, token=first)
    api_token_create(actor=cast.owner, name="after revoking", scopes=["read"], expires_at=None)


@pytest.mark.django_db
def test_only_a_live_token_of_ones_own_can_be_a_parent(cast: Cast) -> None:
    theirs, _ = api_token_create(actor=cast.outsider, name="o", scopes=["write"], expires_at=None)
    with pytest.raises(PermissionDenied):
        api_token_create(
            actor=cast.owner, name="x", scopes=["read"], expires_at=None, parent=theirs
        )
    mine, _ = api_token_create(actor=cast.owner, name="m", scopes=["write"], expires_at=None)
    api_token_revoke(actor=cast.owner, token=mine)
    with pytest.raises(PermissionDenied):
        api_token_create(actor=cast.owner, name="x", scopes=["read"], expires_at=None, parent=mine)


@pytest.mark.django_db
def test_revoking_revokes_the_whole_family_below(cast: Cast) -> None:
    root, _ = api_token_create(actor=cast.owner, name="root", scopes=["write"], expires_at=None)
    child, _ = api_token_create(
        actor=cast.owner, name="c", scopes=["write"], expires_at=None, parent=root
    )
    api_token_create(actor=cast.owner, name="g", scopes=["read"], expires_at=None, parent=child)
    api_token_create(actor=cast.owner, name="s", scopes=["read"], expires_at=None)
    portal = Client()
    portal.force_login(cast.owner)
    assert portal.post(f"/accounts/tokens/{child.pk}/revoke/").status_code == 302
    states = {t.name: t.revoked_at is not None for t in ApiToken.objects.all()}
    assert states == {"root": False, "c": True, "g": True, "s": False}


@pytest.mark.django_db
def test_portal_offers_only_lifetimes_within_the_maximum(cast: Cast, settings: Any) -> None:
    settings.API_TOKEN_MAX_LIFETIME_DAYS = 45
    portal = Client()
    portal.force_login(cast.owner)
    page = portal.get("/accounts/tokens/").content.decode()
    values = re.findall(r'<option value="([^"]+)"', page)
    assert values == ["7", "30", "45"]
    assert "45 days (the longest allowed)" in page
    refused = portal.post("/accounts/tokens/", {"name": "x", "scopes": ["read"], "expiry": "90"})
    assert refused.status_code == 400
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    ("max_days", "values"),
    [
        (0, ["7", "30", "90", "365", "never"]),
        (365, ["7", "30", "90", "365"]),
        (1, ["1"]),
        (400, ["7", "30", "90", "365", "400"]),
    ],
)
def test_expiry_choices_follow_the_maximum(max_days: int, values: list[str]) -> None:
    assert [value for value, _ in expiry_choices(max_days)] == values


@pytest.mark.django_db
def test_token_creation_is_audited_with_its_parent(cast: Cast) -> None:
    from apps.audit.models import AuditEvent

    root, _ = api_token_create(actor=cast.owner, name="root", scopes=["write"], expires_at=None)
    child, _ = api_token_create(
        actor=cast.owner, name="c", scopes=["read"], expires_at=None, parent=root
    )
    event = AuditEvent.objects.get(action="token.create", object_id=str(child.pk))
    assert event.details["parent"] == root.pk
    assert event.details["expires_at"] is not None
    with pytest.raises(ValidationError):
        api_token_create(actor=cast.owner, name=" ", scopes=["read"], expires_at=None)
