"""Sign-in against a real OpenID provider process (deploy/oidc-provider) on loopback."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from apps.accounts import discovery
from apps.accounts.models import Membership, OidcIdentity, Team, User, UserSession
from apps.accounts.oidc import GpupaasOIDCBackend
from apps.accounts.roles import Role
from apps.accounts.selectors import platform_roles
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from tests.accounts.oidc_helpers import age_groups
from tests.factories import MembershipFactory, TeamFactory, UserFactory
from tests.plugins.oidc import SHORT_ID_TOKEN_TTL, login_via_provider

pytestmark = [pytest.mark.oidc, pytest.mark.django_db]


@pytest.fixture
def oidc(settings: Any, oidc_provider: Any) -> Any:
    for key, value in oidc_provider.django_settings().items():
        setattr(settings, key, value)
    settings.OIDC_ENABLED = True
    settings.OIDC_ADMIN_GROUPS = ["gpupaas-admins"]
    settings.OIDC_CLOCK_LEEWAY_SECONDS = 0
    settings.AUTHENTICATION_BACKENDS = [
        "apps.accounts.oidc.GpupaasOIDCBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    cache.clear()  # re-check retry marks and seen logout tokens of earlier tests
    return oidc_provider


@pytest.fixture
def teams(db: None) -> dict[str, Team]:
    return {
        "vision": TeamFactory(name="Vision", idp_group="gpupaas-team-vision"),
        "nlp": TeamFactory(name="NLP", idp_group="gpupaas-team-nlp"),
    }


def sign_in(client: Client, oidc: Any, username: str, next_url: str | None = None) -> Any:
    start = client.get("/oidc/authenticate/", {"next": next_url} if next_url else {})
    assert start.status_code == 302
    callback = login_via_provider(start["Location"], username, oidc.user(username).password)
    parts = urlsplit(callback)
    assert parts.path == "/oidc/callback/"
    return client.get(f"{parts.path}?{parts.query}")


def test_code_flow_signs_in_and_maps_two_groups_to_two_teams(
    oidc: Any, teams: dict[str, Team]
) -> None:
    client = Client()
    response = sign_in(client, oidc, "bob")
    assert response.status_code == 302
    assert response["Location"] == "/"
    user = User.objects.get(oidc_identities__subject="u-bob")
    identity = OidcIdentity.objects.get(user=user)
    assert identity.issuer == oidc.issuer
    assert sorted(m.team.slug for m in user.memberships.all()) == ["nlp", "vision"]
    assert all(m.source == Membership.Source.IDP for m in user.memberships.all())
    assert user.email == "bob@example.com"
    assert user.is_staff is False
    assert client.get("/").status_code == 200
    assert AuditEvent.objects.filter(action="auth.login", actor=user).exists()


def test_user_without_a_configured_group_gets_the_no_team_page(
    oidc: Any, teams: dict[str, Team]
) -> None:
    client = Client()
    sign_in(client, oidc, "dave")
    home = client.get("/")
    assert home.status_code == 302
    assert home["Location"] == "/accounts/no-team/"
    page = client.get("/accounts/no-team/").content.decode()
    assert "No team yet" in page
    assert "sent no groups" in page


def test_leaving_a_group_removes_access_at_next_sign_in(oidc: Any, teams: dict[str, Team]) -> None:
    sign_in(Client(), oidc, "bob")
    user = User.objects.get(oidc_identities__subject="u-bob")
    assert user.memberships.count() == 2
    # The provider now says bob is only in NLP: the same identity signs in again.
    teams["vision"].idp_group = "gpupaas-team-vision-renamed"
    teams["vision"].save()
    sign_in(Client(), oidc, "bob")
    assert [m.team.slug for m in user.memberships.all()] == ["nlp"]
    assert User.objects.filter(oidc_identities__subject="u-bob").count() == 1


def test_manual_membership_survives_group_sync(oidc: Any, teams: dict[str, Team]) -> None:
    sign_in(Client(), oidc, "carol")
    user = User.objects.get(oidc_identities__subject="u-carol")
    Membership.objects.create(user=user, team=teams["vision"], source=Membership.Source.MANUAL)
    sign_in(Client(), oidc, "carol")
    assert sorted(m.team.slug for m in user.memberships.all()) == ["nlp", "vision"]


def test_admin_group_makes_a_platform_admin(oidc: Any, teams: dict[str, Team]) -> None:
    client = Client()
    sign_in(client, oidc, "admin")
    user = User.objects.get(oidc_identities__subject="u-admin")
    assert user.is_staff and user.is_superuser
    assert client.get("/admin/").status_code == 200


def test_users_are_matched_on_subject_never_on_email(oidc: Any, teams: dict[str, Team]) -> None:
    # A local account with bob's e-mail must not be taken over by whoever the provider calls bob.
    local = UserFactory(username="bob-local", email="bob@example.com", is_staff=True)
    sign_in(Client(), oidc, "bob")
    signed_in = User.objects.get(oidc_identities__subject="u-bob")
    assert signed_in.pk != local.pk
    assert not OidcIdentity.objects.filter(user=local).exists()
    assert signed_in.is_staff is False


def test_next_is_kept_on_site(oidc: Any, teams: dict[str, Team]) -> None:
    response = sign_in(Client(), oidc, "alice", next_url="/accounts/tokens/")
    assert response["Location"] == "/accounts/tokens/"


@pytest.mark.parametrize(
    "evil",
    ["//evil.example/", "/\\evil.example", "https://evil.example/", "https://testserver//evil"],
)
def test_next_cannot_redirect_off_site(oidc: Any, teams: dict[str, Team], evil: str) -> None:
    response = sign_in(Client(), oidc, "alice", next_url=evil)
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_tampered_state_is_refused(oidc: Any, teams: dict[str, Team]) -> None:
    client = Client()
    start = client.get("/oidc/authenticate/")
    callback = login_via_provider(start["Location"], "alice", oidc.user("alice").password)
    parts = urlsplit(callback)
    query = parse_qs(parts.query)
    response = client.get(parts.path, {"code": query["code"][0], "state": "forged-state"})
    assert response.status_code == 400
    assert "Sign-in failed" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(oidc_identities__subject="u-alice").exists()


def test_callback_without_a_started_flow_is_refused(oidc: Any) -> None:
    response = Client().get("/oidc/callback/", {"code": "abc", "state": "xyz"})
    assert response.status_code == 400
    assert "Sign-in failed" in response.content.decode()


def test_provider_error_is_shown(oidc: Any) -> None:
    client = Client()
    client.get("/oidc/authenticate/")
    response = client.get("/oidc/callback/", {"error": "access_denied", "error_description": "no"})
    assert response.status_code == 400
    assert "no" in response.content.decode()


def _id_token_for(oidc: Any, client_id: str, username: str, nonce: str) -> str:
    client = oidc.client(client_id)
    url = oidc.authorize_url(client_id=client_id, state="s", nonce=nonce)
    code = parse_qs(
        urlsplit(login_via_provider(url, username, oidc.user(username).password)).query
    )["code"][0]
    response = requests.post(
        oidc.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": "http://testserver/oidc/callback/",
            "client_id": client.client_id,
            "client_secret": client.client_secret,
        },
        timeout=10,
    )
    response.raise_for_status()
    return str(response.json()["id_token"])


def test_id_token_for_another_audience_is_refused(oidc: Any) -> None:
    from django.core.exceptions import SuspiciousOperation

    token = _id_token_for(oidc, "gpupaas-other", "alice", nonce="n1")
    backend = GpupaasOIDCBackend()
    with pytest.raises(SuspiciousOperation, match="audience"):
        backend.verify_token(token, nonce="n1")


def test_expired_id_token_is_refused(oidc: Any, settings: Any) -> None:
    from django.core.exceptions import SuspiciousOperation

    for key, value in oidc.django_settings("gpupaas-short").items():
        setattr(settings, key, value)
    token = _id_token_for(oidc, "gpupaas-short", "alice", nonce="n2")
    backend = GpupaasOIDCBackend()
    assert backend.verify_token(token, nonce="n2")["sub"] == "u-alice"
    time.sleep(SHORT_ID_TOKEN_TTL + 1.5)
    with pytest.raises(SuspiciousOperation, match="expired"):
        backend.verify_token(token, nonce="n2")


def test_logout_is_post_only_and_ends_the_session(oidc: Any, teams: dict[str, Team]) -> None:
    client = Client()
    sign_in(client, oidc, "alice")
    assert client.get("/accounts/logout/").status_code == 405
    assert client.get("/").status_code == 200
    response = client.post("/accounts/logout/")
    assert response.status_code == 200
    assert "signed out" in response.content.decode()
    assert client.get("/")["Location"].startswith("/accounts/login/")


# --- groups as full paths, short names, a string, or absent ------------------------------------


def _user(username: str) -> User:
    return User.objects.get(oidc_identities__subject=f"u-{username}")


def _teams_of(user: User) -> list[tuple[str, str, str]]:
    return sorted((m.team.slug, m.role, m.source) for m in user.memberships.all())


@pytest.fixture
def sign_in_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="apps.accounts")
    caplog.set_level(logging.INFO, logger="apps.web")
    return caplog


def test_groups_as_full_paths_map_to_teams_and_admin_in_path_format(
    oidc: Any, settings: Any, sign_in_log: pytest.LogCaptureFixture
) -> None:
    settings.OIDC_GROUPS_FORMAT = "path"
    TeamFactory(name="Vision", idp_group="/ml/vision")
    client = Client()
    sign_in(client, oidc, "paula")
    user = _user("paula")
    assert _teams_of(user) == [("vision", "member", "idp")]
    # OIDC_ADMIN_GROUPS=gpupaas-admins names the top-level group /gpupaas-admins.
    assert user.is_staff and user.is_superuser
    assert "full paths" in sign_in_log.text
    assert "/ml/vision, /gpupaas-admins" in sign_in_log.text


def test_groups_as_short_names_map_to_teams_and_admin_in_name_format(
    oidc: Any, settings: Any, sign_in_log: pytest.LogCaptureFixture
) -> None:
    settings.OIDC_GROUPS_FORMAT = "name"
    TeamFactory(name="Vision", idp_group="vision")
    TeamFactory(name="Robotics", idp_group="/ml/robotics")
    sign_in(Client(), oidc, "nina")
    user = _user("nina")
    assert _teams_of(user) == [("vision", "member", "idp")]
    assert user.is_staff
    assert "short names" in sign_in_log.text
    # A team configured with a path can never match short names: said, not silent.
    assert "can never match" in sign_in_log.text
    assert "/ml/robotics" in sign_in_log.text


def test_one_group_sent_as_a_plain_string_is_one_group(
    oidc: Any, sign_in_log: pytest.LogCaptureFixture
) -> None:
    TeamFactory(name="Vision", idp_group="/ml/vision")
    sign_in(Client(), oidc, "stan")
    assert _teams_of(_user("stan")) == [("vision", "member", "idp")]
    assert "a string of 1" in sign_in_log.text


def test_absent_groups_claim_leaves_no_memberships_from_groups_and_says_so(
    oidc: Any, sign_in_log: pytest.LogCaptureFixture
) -> None:
    vision = TeamFactory(name="Vision", idp_group="/ml/vision")
    manual = TeamFactory(name="Manual", idp_group="")
    sign_in(Client(), oidc, "abby")
    user = _user("abby")
    MembershipFactory(user=user, team=vision, source=Membership.Source.IDP)
    MembershipFactory(user=user, team=manual, source=Membership.Source.MANUAL)
    sign_in(Client(), oidc, "abby")
    assert _teams_of(user) == [("manual", "member", "manual")]
    assert "absent" in sign_in_log.text
    assert "no usable groups claim" in sign_in_log.text
    event = AuditEvent.objects.filter(action="auth.login", actor=user).latest("id")
    assert "absent" in event.details["groups_claim"]


def test_path_format_ignores_short_names_and_reports_them(
    oidc: Any, settings: Any, teams: dict[str, Team], sign_in_log: pytest.LogCaptureFixture
) -> None:
    settings.OIDC_GROUPS_FORMAT = "path"
    sign_in(Client(), oidc, "nina")
    user = _user("nina")
    assert _teams_of(user) == []
    assert user.is_staff is False
    assert "do not fit OIDC_GROUPS_FORMAT=path: vision, gpupaas-admins" in sign_in_log.text


# --- discovery ---------------------------------------------------------------------------------


def _endpoints_unset(settings: Any) -> None:
    for name in discovery.ENDPOINTS:
        setattr(settings, name, "")
    discovery.forget()


def test_issuer_client_id_and_secret_are_enough_endpoints_come_from_discovery(
    oidc: Any, settings: Any, teams: dict[str, Team]
) -> None:
    _endpoints_unset(settings)
    client = Client()
    response = sign_in(client, oidc, "bob")
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert sorted(m.team.slug for m in _user("bob").memberships.all()) == ["nlp", "vision"]
    # The end-session endpoint is discovered too and offered after signing out.
    assert oidc.end_session_endpoint in client.post("/accounts/logout/").content.decode()


def test_unreachable_issuer_gives_a_page_that_says_so_and_a_log_that_says_where(
    oidc: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _endpoints_unset(settings)
    settings.OIDC_OP_ISSUER = "http://127.0.0.1:9"
    response = Client().get("/oidc/authenticate/")
    assert response.status_code == 503
    assert "cannot be reached" in response.content.decode()
    assert "http://127.0.0.1:9/.well-known/openid-configuration" in caplog.text


def test_discovery_document_of_another_issuer_is_refused(oidc: Any, settings: Any) -> None:
    _endpoints_unset(settings)
    settings.OIDC_OP_ISSUER = oidc.issuer + "/"
    with pytest.raises(discovery.DiscoveryError, match="must match exactly"):
        discovery.endpoint("OIDC_OP_TOKEN_ENDPOINT")


# --- the provider's groups, checked again between sign-ins -------------------------------------


@pytest.fixture
def mo(oidc: Any) -> Any:
    """The provider user ``mo`` (vision member), restored after the test."""
    yield oidc
    oidc.reset_user("mo")


def test_sign_in_keeps_the_refresh_token_and_indexes_the_session(
    mo: Any, teams: dict[str, Team]
) -> None:
    client = Client()
    sign_in(client, mo, "mo")
    user = _user("mo")
    assert user.idp_checked_at is not None
    assert OidcIdentity.objects.get(user=user).refresh_token
    assert UserSession.objects.filter(user=user, session_key=client.session.session_key).exists()


def test_session_picks_up_group_changes_at_the_provider_after_the_interval(
    mo: Any, settings: Any, teams: dict[str, Team]
) -> None:
    client = Client()
    sign_in(client, mo, "mo")
    user = _user("mo")
    mo.set_user("mo", groups=["gpupaas-team-nlp"])
    assert client.get("/accounts/profile/").status_code == 200
    assert _teams_of(user) == [("vision", "member", "idp")]  # not due yet
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert client.get("/accounts/profile/").status_code == 200
    assert _teams_of(user) == [("nlp", "member", "idp")]
    user.refresh_from_db()
    assert user.idp_checked_at is not None
    assert timezone.now() - user.idp_checked_at < timedelta(minutes=1)
    event = AuditEvent.objects.get(action="auth.groups_refresh", object_id=str(user.pk))
    assert event.details["groups"] == ["gpupaas-team-nlp"]


def test_platform_roles_come_from_the_providers_groups_at_sign_in_and_re_check(
    mo: Any, settings: Any, teams: dict[str, Team]
) -> None:
    settings.OIDC_AUDITOR_GROUPS = ["gpupaas-auditors"]
    settings.OIDC_BILLING_GROUPS = ["gpupaas-billing"]
    mo.set_user("mo", groups=["gpupaas-team-vision", "gpupaas-auditors"])
    client = Client()
    sign_in(client, mo, "mo")
    user = _user("mo")
    assert platform_roles(user) == {Role.AUDITOR}
    assert user.is_staff and not user.is_superuser
    assert client.get("/admin/workloads/workload/").status_code == 200  # view only
    mo.set_user("mo", groups=["gpupaas-team-vision", "gpupaas-billing"])
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert client.get("/accounts/profile/").status_code == 200
    assert platform_roles(_user("mo")) == {Role.BILLING}
    assert client.get("/admin/workloads/workload/").status_code == 403


def test_api_token_picks_up_group_changes_at_the_provider_after_the_interval(
    mo: Any, settings: Any, teams: dict[str, Team]
) -> None:
    sign_in(Client(), mo, "mo")
    user = _user("mo")
    _, plaintext = api_token_create(actor=user, name="ci", scopes=["read"], expires_at=None)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert [t["slug"] for t in api.get("/api/v1/teams/").json()] == ["vision"]
    mo.set_user("mo", groups=["gpupaas-team-nlp"])
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert [t["slug"] for t in api.get("/api/v1/teams/").json()] == ["nlp"]


def test_unreachable_provider_keeps_memberships_until_twice_the_interval(
    mo: Any, settings: Any, teams: dict[str, Team], caplog: pytest.LogCaptureFixture
) -> None:
    client = Client()
    sign_in(client, mo, "mo")
    user = _user("mo")
    settings.OIDC_OP_TOKEN_ENDPOINT = "http://127.0.0.1:9/token"
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert client.get("/accounts/profile/").status_code == 200
    assert _teams_of(user) == [("vision", "member", "idp")]
    assert "provider is unreachable" in caplog.text
    cache.clear()  # the next try, a minute later
    age_groups(user, 2 * settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    assert _teams_of(user) == []
    event = AuditEvent.objects.get(action="auth.groups_lapsed", object_id=str(user.pk))
    assert "unreachable" in event.details["reason"]


def test_without_a_refresh_token_provider_memberships_lapse_but_manual_ones_and_tokens_stay(
    mo: Any, settings: Any, teams: dict[str, Team]
) -> None:
    client = Client()
    sign_in(client, mo, "mo")
    user = _user("mo")
    MembershipFactory(user=user, team=teams["nlp"], source=Membership.Source.MANUAL)
    OidcIdentity.objects.filter(user=user).update(refresh_token="")
    _, plaintext = api_token_create(actor=user, name="ci", scopes=["read"], expires_at=None)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
    assert [t["slug"] for t in api.get("/api/v1/teams/").json()] == ["nlp"]
    assert _teams_of(user) == [("nlp", "member", "manual")]
    # The lapse ended the portal session; the next sign-in restores the provider's teams.
    assert client.get("/accounts/profile/")["Location"].startswith("/accounts/login/")
    sign_in(client, mo, "mo")
    assert _teams_of(user) == [("nlp", "member", "manual"), ("vision", "member", "idp")]


def test_deactivated_user_is_told_so_at_sign_in(oidc: Any, teams: dict[str, Team]) -> None:
    sign_in(Client(), oidc, "carol")
    User.objects.filter(oidc_identities__subject="u-carol").update(is_active=False)
    client = Client()
    response = sign_in(client, oidc, "carol")
    assert response.status_code == 403
    assert "deactivated" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="auth.login_refused").exists()
