"""Sign-in against a real OpenID provider process (deploy/oidc-provider) on loopback."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.test import Client

from apps.accounts.models import Membership, OidcIdentity, Team, User
from apps.accounts.oidc import GpupaasOIDCBackend
from apps.audit.models import AuditEvent
from tests.factories import TeamFactory, UserFactory
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
