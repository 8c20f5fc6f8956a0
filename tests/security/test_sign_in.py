"""Attacks on sign-in that worked against earlier versions, each replayed against the real
OpenID provider process (deploy/oidc-provider).

The lifecycle: an admin's deactivation must survive sign-in and stop sessions and tokens at
once; removal from a group or from the provider must reach sessions and tokens within
OIDC_GROUPS_MAX_AGE_SECONDS; signing out at the provider must end the portal session; a lead
must not make their own membership outlive the group. The groups claim: full paths and short
names must neither lock people out silently nor match by a path's last segment; provider
errors must reach the log with their reason.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import Membership, Team, User
from apps.accounts.services import api_token_create, user_admin_save
from apps.audit.models import AuditEvent
from tests.accounts.oidc_helpers import (
    age_groups,
    configure,
    live_sign_in,
    live_signed_in,
    serve_live_portal,
    sign_in,
    sign_out_at_provider,
)
from tests.factories import TeamFactory
from tests.plugins.oidc import OIDCProvider

pytestmark = [pytest.mark.oidc]


@pytest.fixture
def oidc(settings: Any, oidc_provider: OIDCProvider) -> Iterator[OIDCProvider]:
    configure(settings, oidc_provider)
    yield oidc_provider
    for username in ("mo", "lena"):
        oidc_provider.reset_user(username)


@pytest.fixture
def vision(db: None) -> Team:
    return TeamFactory(
        name="Vision", idp_group="gpupaas-team-vision", idp_lead_group="gpupaas-team-vision-leads"
    )


def _user(username: str) -> User:
    return User.objects.get(oidc_identities__subject=f"u-{username}")


def _team_slugs(user: User) -> list[str]:
    return sorted(user.memberships.values_list("team__slug", flat=True))


def _bearer(user: User) -> Client:
    _, plaintext = api_token_create(actor=user, name="ci", scopes=["write"], expires_at=None)
    return Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def _deactivate(user: User) -> None:
    user.is_active = False
    user_admin_save(actor=None, user=user)


# --- lifecycle ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sign_in_does_not_reactivate_a_user_an_admin_deactivated(
    oidc: OIDCProvider, vision: Team
) -> None:
    sign_in(Client(), oidc, "alice")
    _deactivate(_user("alice"))
    client = Client()
    response = sign_in(client, oidc, "alice")
    assert response.status_code == 403
    assert _user("alice").is_active is False
    assert client.get("/accounts/profile/").status_code == 302


@pytest.mark.django_db
def test_deactivated_users_session_ends_at_the_next_request(
    oidc: OIDCProvider, vision: Team
) -> None:
    client = Client()
    sign_in(client, oidc, "alice")
    assert client.get("/accounts/profile/").status_code == 200
    user = _user("alice")
    _deactivate(user)
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    assert client.get("/api/v1/me/").status_code in (401, 403)
    # Ended for good: re-activating the account does not revive the old session.
    user.is_active = True
    user_admin_save(actor=None, user=user)
    assert client.get("/accounts/profile/").status_code == 302


@pytest.mark.django_db
def test_deactivated_users_api_token_is_refused(oidc: OIDCProvider, vision: Team) -> None:
    sign_in(Client(), oidc, "alice")
    api = _bearer(_user("alice"))
    assert api.get("/api/v1/me/").status_code == 200
    _deactivate(_user("alice"))
    assert api.get("/api/v1/me/").status_code == 401


@pytest.mark.django_db
def test_api_token_loses_a_team_removed_at_the_provider_within_the_interval(
    oidc: OIDCProvider, vision: Team, settings: Any
) -> None:
    sign_in(Client(), oidc, "mo")
    user = _user("mo")
    api = _bearer(user)
    assert [t["slug"] for t in api.get("/api/v1/teams/").json()] == ["vision"]
    oidc.set_user("mo", groups=[])
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS)
    assert api.get("/api/v1/teams/").json() == []
    assert api.get("/api/v1/teams/vision/").status_code == 404
    assert _team_slugs(user) == []


@pytest.mark.django_db
def test_session_loses_a_team_removed_at_the_provider_within_the_interval(
    oidc: OIDCProvider, vision: Team, settings: Any
) -> None:
    client = Client()
    sign_in(client, oidc, "mo")
    user = _user("mo")
    assert client.get("/teams/vision/").status_code == 200
    oidc.set_user("mo", groups=[])
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS)
    assert client.get("/teams/vision/").status_code == 404
    assert _team_slugs(user) == []


@pytest.mark.django_db
def test_user_disabled_at_the_provider_loses_the_portal_session(
    oidc: OIDCProvider, vision: Team, settings: Any
) -> None:
    client = Client()
    sign_in(client, oidc, "mo")
    user = _user("mo")
    oidc.set_user("mo", disabled=True)
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS)
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    assert _team_slugs(user) == []
    lapsed = AuditEvent.objects.get(action="auth.groups_lapsed", object_id=str(user.pk))
    assert "invalid_grant" in lapsed.details["reason"]


@pytest.mark.django_db(transaction=True)
def test_signing_out_at_the_provider_ends_the_portal_session(
    settings: Any, oidc_provider: OIDCProvider, live_server: Any
) -> None:
    TeamFactory(name="Vision", idp_group="gpupaas-team-vision")
    base = serve_live_portal(settings, oidc_provider, live_server.url)
    portal, idp = live_sign_in(base, oidc_provider, "alice")
    assert live_signed_in(portal, base)
    sign_out_at_provider(idp, oidc_provider)
    assert not live_signed_in(portal, base)


@pytest.mark.django_db
def test_lead_cannot_re_set_own_membership_to_keep_it_after_losing_the_group(
    oidc: OIDCProvider, vision: Team
) -> None:
    sign_in(Client(), oidc, "lena")
    lena = _user("lena")
    assert lena.memberships.get(team=vision).role == Membership.Role.LEAD
    response = _bearer(lena).post(
        "/api/v1/teams/vision/members/",
        {"username": lena.username, "role": "lead"},
        content_type="application/json",
    )
    assert response.status_code == 403
    assert lena.memberships.get(team=vision).source == Membership.Source.IDP
    oidc.set_user("lena", groups=[])
    sign_in(Client(), oidc, "lena")
    assert _team_slugs(lena) == []


@pytest.mark.django_db
def test_lead_cannot_turn_a_membership_the_provider_owns_into_a_manual_one(
    oidc: OIDCProvider, vision: Team
) -> None:
    sign_in(Client(), oidc, "lena")
    sign_in(Client(), oidc, "alice")
    response = _bearer(_user("lena")).post(
        "/api/v1/teams/vision/members/",
        {"username": _user("alice").username, "role": "lead"},
        content_type="application/json",
    )
    assert response.status_code == 403
    membership = _user("alice").memberships.get(team=vision)
    assert (membership.role, membership.source) == (Membership.Role.MEMBER, Membership.Source.IDP)


# --- the groups claim ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_groups_sent_as_full_paths_keep_teams_and_admin_rights_and_are_logged(
    oidc: OIDCProvider, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="apps.accounts")
    settings.OIDC_GROUPS_FORMAT = "path"
    TeamFactory(name="Vision", idp_group="/ml/vision")
    client = Client()
    sign_in(client, oidc, "paula")
    user = _user("paula")
    assert _team_slugs(user) == ["vision"]
    assert user.is_staff is True
    assert client.get("/").status_code == 200
    assert "full paths" in caplog.text
    assert "/gpupaas-admins" in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize("groups_format", ["auto", "path", "name"])
def test_nested_group_named_like_the_admin_group_grants_no_admin_rights(
    oidc: OIDCProvider, settings: Any, groups_format: str
) -> None:
    settings.OIDC_GROUPS_FORMAT = groups_format
    settings.OIDC_ADMIN_GROUPS = ["platform-admins"]
    TeamFactory(name="Vision", idp_group="vision")
    client = Client()
    sign_in(client, oidc, "conny")  # only in /contractors/platform-admins, /contractors/vision
    user = _user("conny")
    assert user.is_staff is False
    assert user.is_superuser is False
    assert _team_slugs(user) == []
    assert client.get("/admin/").status_code == 302


@pytest.mark.django_db
def test_provider_error_on_the_callback_is_logged_with_its_reason(
    oidc: OIDCProvider, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client()
    start = client.get("/oidc/authenticate/")
    state = start["Location"].split("state=")[1].split("&")[0]
    response = client.get(
        "/oidc/callback/",
        {"error": "access_denied", "error_description": "user is locked", "state": state},
    )
    assert response.status_code == 400
    assert "user is locked" in response.content.decode()
    assert "access_denied" in caplog.text
    assert "user is locked" in caplog.text
