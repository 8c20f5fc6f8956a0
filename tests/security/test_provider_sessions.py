"""Sessions that live as long as the identity provider allows, against the development provider
configured as a stock Keycloak realm is: refresh tokens that expire when unused for less than
the portal's group re-check interval ("SSO Session Idle"), refusals worded as Keycloak words
them, RP-initiated logout that returns to the portal, a user disabled there refused on the
very request that finds it, and sessions ended there without a logout token (Keycloak's realm
action "Sign out all active sessions") ending here at the next session check."""

from __future__ import annotations

import copy
import html
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from apps.accounts.models import ApiToken, OidcIdentity, Team, User
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from tests.accounts.oidc_helpers import age_groups, configure, sign_out_at_provider
from tests.factories import TeamFactory
from tests.plugins.oidc import (
    TEST_CLIENT_ID,
    OIDCProvider,
    default_test_config,
    login_via_provider,
    run_provider,
)

pytestmark = [pytest.mark.oidc, pytest.mark.django_db]

# Seconds an unused refresh token lives at this provider (Keycloak: 30 minutes by default),
# far below the portal's hourly group re-check.
IDLE = 4


@pytest.fixture(scope="module")
def idle_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OIDCProvider]:
    config = copy.deepcopy(default_test_config()) | {"refresh_idle_ttl": IDLE}
    with run_provider(config, tmp_path_factory.mktemp("oidc-idle")) as provider:
        yield provider


@pytest.fixture
def oidc(settings: Any, idle_provider: OIDCProvider) -> Iterator[OIDCProvider]:
    configure(settings, idle_provider)
    settings.OIDC_TOKEN_USE_BASIC_AUTH = False  # the test clients use client_secret_post
    yield idle_provider
    idle_provider.reset_user("mo")


@pytest.fixture
def vision(db: None) -> Team:
    return TeamFactory(name="Vision", idp_group="gpupaas-team-vision")


def _sign_in(client: Client, provider: OIDCProvider, username: str) -> requests.Session:
    """The code flow; returns the browser's session at the provider (its cookies)."""
    idp = requests.Session()
    start = client.get("/oidc/authenticate/")
    callback = login_via_provider(
        start["Location"], username, provider.user(username).password, session=idp
    )
    parts = urlsplit(callback)
    assert client.get(f"{parts.path}?{parts.query}").status_code == 302
    return idp


def _user(username: str) -> User:
    return User.objects.get(oidc_identities__subject=f"u-{username}")


def _team_slugs(user: User) -> list[str]:
    return sorted(user.memberships.values_list("team__slug", flat=True))


def test_provider_idle_timeout_shorter_than_the_recheck_keeps_an_active_users_session(
    oidc: OIDCProvider, vision: Team, settings: Any
) -> None:
    client = Client()
    _sign_in(client, oidc, "mo")
    user = _user("mo")
    assert user.idp_refresh_by is not None  # half of refresh_expires_in from now
    first_token = OidcIdentity.objects.get(user=user).refresh_token
    # Requests every half idle window: each one past the refresh-by moment refreshes.
    for _ in range(2):
        time.sleep(IDLE / 2 + 0.3)
        assert client.get("/accounts/profile/").status_code == 200
    assert OidcIdentity.objects.get(user=user).refresh_token != first_token
    # The sign-in's refresh token has expired by now; the hourly re-check uses the current one.
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert client.get("/accounts/profile/").status_code == 200
    assert _team_slugs(user) == ["vision"]
    assert not AuditEvent.objects.filter(action="auth.groups_lapsed").exists()


def test_session_idle_past_the_providers_window_ends_but_api_tokens_stay(
    oidc: OIDCProvider, vision: Team
) -> None:
    client = Client()
    _sign_in(client, oidc, "mo")
    user = _user("mo")
    token, _ = api_token_create(actor=user, name="ci", scopes=["read"], expires_at=None)
    time.sleep(IDLE + 0.5)  # nothing asked; the provider ended the session
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    lapsed = AuditEvent.objects.get(action="auth.groups_lapsed", object_id=str(user.pk))
    assert "Token is not active" in lapsed.details["reason"]
    assert lapsed.details["tokens_revoked"] == 0
    token.refresh_from_db()
    assert token.revoked_at is None


def test_user_disabled_at_the_provider_is_refused_on_the_request_that_finds_it(
    oidc: OIDCProvider, vision: Team, settings: Any
) -> None:
    """Before, the request whose re-check found the user disabled still passed (with no team)
    and the revoked token was refused only from the next request on."""
    portal = Client()
    _sign_in(portal, oidc, "mo")
    user = _user("mo")
    parent, plaintext = api_token_create(actor=user, name="ci", scopes=["read"], expires_at=None)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert api.get("/api/v1/teams/").status_code == 200
    assert portal.get("/accounts/profile/").status_code == 200
    oidc.set_user("mo", disabled=True)
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    refused = api.get("/api/v1/teams/")
    assert refused.status_code == 401, refused.content
    assert "disabled or gone at the identity provider" in refused.json()["message"]
    assert api.get("/api/v1/teams/").status_code == 401
    # The portal session ended with that re-check too: its next request signs in again.
    assert portal.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    parent.refresh_from_db()
    assert parent.revoked_at is not None
    assert not ApiToken.objects.filter(user=user, revoked_at__isnull=True).exists()
    revoked = AuditEvent.objects.get(action="token.revoke", object_id=str(parent.pk))
    assert revoked.actor is None
    assert "disabled or gone at the provider" in revoked.details["reason"]
    assert "User disabled" in revoked.details["reason"]
    lapsed = AuditEvent.objects.get(action="auth.groups_lapsed", object_id=str(user.pk))
    assert lapsed.details["user_gone"] is True
    assert lapsed.details["tokens_revoked"] == 1


def test_sign_out_there_too_sends_id_token_hint_and_returns_to_the_portal(
    oidc: OIDCProvider, vision: Team
) -> None:
    client = Client()
    idp = _sign_in(client, oidc, "alice")
    id_token = client.session["oidc_id_token"]
    assert id_token.count(".") == 2
    page = client.post("/accounts/logout/")
    assert page.status_code == 200
    match = re.search(r'<a href="([^"]+)">Sign out there too</a>', page.content.decode())
    assert match, page.content.decode()
    link = html.unescape(match.group(1))
    parts = urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == oidc.end_session_endpoint
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    assert query["id_token_hint"] == id_token
    assert query["post_logout_redirect_uri"] == "http://testserver/"
    assert query["client_id"] == TEST_CLIENT_ID
    # At the provider: its sign-out form, then back to the portal.
    done = sign_out_at_provider(idp, oidc, link)
    assert done.status_code == 303
    assert done.headers["Location"] == "http://testserver/"


@pytest.fixture(scope="module")
def realm_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OIDCProvider]:
    """A provider of this module's own: ending every session there touches no other test's."""
    config = copy.deepcopy(default_test_config())
    with run_provider(config, tmp_path_factory.mktemp("oidc-realm")) as provider:
        yield provider


def test_sessions_the_provider_ended_without_a_logout_token_end_at_the_next_session_check(
    realm_provider: OIDCProvider, vision: Team, settings: Any
) -> None:
    """Keycloak's realm action "Sign out all active sessions" tells no OpenID client. Before,
    the portal's sessions lived on until the hourly group re-check; now the session is checked
    with the refresh token every OIDC_SESSION_CHECK_SECONDS (five minutes)."""
    configure(settings, realm_provider)
    settings.OIDC_TOKEN_USE_BASIC_AUTH = False
    client = Client()
    _sign_in(client, realm_provider, "mo")
    user = _user("mo")
    assert realm_provider.end_all_sessions() >= 1
    # No logout token came: the portal has not heard of it yet.
    assert client.get("/accounts/profile/").status_code == 200
    age_groups(user, 5 * 60 + 1)  # past the check interval, far from the hourly re-check
    assert settings.OIDC_GROUPS_MAX_AGE_SECONDS > 5 * 60 + 1
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    lapsed = AuditEvent.objects.get(action="auth.groups_lapsed", object_id=str(user.pk))
    assert "Session not active" in lapsed.details["reason"]
    assert lapsed.details["sessions"] == 1
    assert _team_slugs(user) == []
