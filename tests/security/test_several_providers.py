"""Several identity providers at once (OIDC_PROVIDERS), against two real OpenID provider
processes (deploy/oidc-provider): a company's own and a partner's, with different issuers,
clients, subjects, groups formats and team mappings, and the same people's e-mail addresses.

What must hold: the sign-in page offers each; each provider signs its people in with its own
client and maps its own groups; one person's accounts are linked only where an admin allowed
it and only by a verified e-mail, never silently; the re-check, the back-channel logout and
the sign-out go to the provider the session signed in with.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.core.cache import cache
from django.test import Client

from apps.accounts import discovery
from apps.accounts.models import Membership, OidcIdentity, Team, User, UserSession
from apps.accounts.providers import parse_providers
from apps.audit.models import AuditEvent
from tests.accounts.oidc_helpers import OIDC_BACKEND, age_groups, sign_out_at_provider
from tests.factories import TeamFactory
from tests.plugins.oidc import (
    TEST_CLIENT_ID,
    OIDCProvider,
    default_test_config,
    login_via_provider,
    run_provider,
)

pytestmark = [pytest.mark.oidc]

PARTNER_GROUPS = {"alice": ["/partner/vision"], "nina": ["/partner/vision-leads"], "mo": []}


@pytest.fixture(scope="module")
def partner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OIDCProvider]:
    """The partner's provider: its own issuer and subjects, groups as paths of its own tree,
    the same people's e-mail addresses (verified, except mo's)."""
    config = copy.deepcopy(default_test_config())
    for user in config["users"]:
        user["sub"] = f"partner-{user['username']}"
        user["groups"] = PARTNER_GROUPS.get(user["username"], [])
        if user["username"] == "mo":
            user["email_verified"] = False
    with run_provider(config, Path(tmp_path_factory.mktemp("partner-idp"))) as provider:
        yield provider


def providers_setting(corp: OIDCProvider, partner: OIDCProvider, **partner_extra: Any) -> Any:
    return parse_providers(
        [
            {
                "key": "corp",
                "name": "Corp SSO",
                "issuer": corp.issuer,
                "client_id": TEST_CLIENT_ID,
                "client_secret": corp.client().client_secret,
                "admin_groups": ["gpupaas-admins"],
            },
            {
                "key": "partner",
                "name": "Partner ID",
                "issuer": partner.issuer,
                "client_id": partner_extra.pop("client_id", TEST_CLIENT_ID),
                "client_secret": partner_extra.pop("client_secret", partner.client().client_secret),
                "groups_format": "path",
                "teams": {"vision": {"member": "/partner/vision", "lead": "/partner/vision-leads"}},
                **partner_extra,
            },
        ],
        env={},
    )


def configure_both(
    settings: Any, corp: OIDCProvider, partner: OIDCProvider, **partner_extra: Any
) -> None:
    for name in ("OIDC_RP_CLIENT_ID", "OIDC_OP_ISSUER", "OIDC_RP_CLIENT_SECRET"):
        setattr(settings, name, "")
    for name in discovery.ENDPOINTS:
        setattr(settings, name, "")  # every endpoint from each provider's discovery
    settings.OIDC_PROVIDERS = providers_setting(corp, partner, **partner_extra)
    settings.OIDC_ENABLED = True
    settings.AUTHENTICATION_BACKENDS = [OIDC_BACKEND, "django.contrib.auth.backends.ModelBackend"]
    discovery.forget()
    cache.clear()


@pytest.fixture
def both(settings: Any, oidc_provider: OIDCProvider, partner: OIDCProvider) -> OIDCProvider:
    configure_both(settings, oidc_provider, partner)
    return partner


@pytest.fixture
def vision(db: None) -> Team:
    return TeamFactory(
        name="Vision", idp_group="gpupaas-team-vision", idp_lead_group="gpupaas-team-vision-leads"
    )


def sign_in_at(client: Client, provider: OIDCProvider, key: str, username: str) -> Any:
    start = client.get(f"/oidc/authenticate/?provider={key}")
    assert start.status_code == 302, start.content
    assert start["Location"].startswith(provider.authorization_endpoint)
    callback = login_via_provider(start["Location"], username, provider.user(username).password)
    parts = urlsplit(callback)
    return client.get(f"{parts.path}?{parts.query}")


@pytest.mark.django_db
def test_the_sign_in_page_offers_each_provider_and_a_bare_start_asks_to_choose(
    both: OIDCProvider,
) -> None:
    page = Client().get("/accounts/login/?next=/workloads/")
    text = page.content.decode()
    assert "Sign in with Corp SSO" in text and "Sign in with Partner ID" in text
    assert "/oidc/authenticate/?provider=corp&amp;next=/workloads/" in text
    assert "/oidc/authenticate/?provider=partner&amp;next=/workloads/" in text
    bare = Client().get("/oidc/authenticate/?next=/workloads/")
    assert bare.status_code == 302
    assert bare["Location"] == "/accounts/login/?next=%2Fworkloads%2F"
    unknown = Client().get("/oidc/authenticate/?provider=github")
    assert unknown.status_code == 404
    assert "no identity provider &#x27;github&#x27; here (there are corp, partner)" in (
        unknown.content.decode()
    )


@pytest.mark.django_db
def test_each_provider_signs_its_people_in_with_its_own_client_and_team_mapping(
    both: OIDCProvider, oidc_provider: OIDCProvider, vision: Team
) -> None:
    start = Client().get("/oidc/authenticate/?provider=partner")
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["client_id"] == [TEST_CLIENT_ID]
    assert start["Location"].startswith(both.authorization_endpoint)

    nina = Client()
    assert sign_in_at(nina, both, "partner", "nina").status_code == 302
    identity = OidcIdentity.objects.get(subject="partner-nina")
    assert identity.issuer == both.issuer
    # The partner's path "/partner/vision-leads" is Vision's lead group there (its mapping);
    # the team's own IdP groups are the company's.
    assert Membership.objects.get(user=identity.user, team=vision).role == "lead"
    assert UserSession.objects.get(user=identity.user).identity == identity
    assert nina.get("/accounts/profile/").status_code == 200

    bob = Client()
    assert sign_in_at(bob, oidc_provider, "corp", "bob").status_code == 302
    corp_bob = OidcIdentity.objects.get(subject="u-bob")
    assert corp_bob.issuer == oidc_provider.issuer
    assert Membership.objects.get(user=corp_bob.user, team=vision).role == "member"


@pytest.mark.django_db
def test_the_same_verified_email_at_a_second_provider_is_refused_until_an_admin_allows_linking(
    settings: Any, both: OIDCProvider, oidc_provider: OIDCProvider, vision: Team
) -> None:
    assert sign_in_at(Client(), oidc_provider, "corp", "alice").status_code == 302
    alice = User.objects.get(oidc_identities__subject="u-alice")

    refused = sign_in_at(Client(), both, "partner", "alice")
    assert refused.status_code == 409
    text = refused.content.decode()
    assert "already signs in with alice@example.com through Corp SSO" in text
    assert "link_by_verified_email" in text
    assert User.objects.filter(email__iexact="alice@example.com").count() == 1
    assert not OidcIdentity.objects.filter(issuer=both.issuer).exists()
    assert AuditEvent.objects.filter(
        action="auth.login_refused", details__subject="partner-alice"
    ).exists()

    configure_both(settings, oidc_provider, both, link_by_verified_email=True)
    linked = Client()
    assert sign_in_at(linked, both, "partner", "alice").status_code == 302
    assert set(alice.oidc_identities.values_list("issuer", flat=True)) == {
        oidc_provider.issuer,
        both.issuer,
    }
    assert User.objects.filter(email__iexact="alice@example.com").count() == 1
    assert AuditEvent.objects.filter(
        action="auth.identity_linked", object_id=str(alice.pk)
    ).exists()
    assert linked.get("/accounts/profile/").status_code == 200


@pytest.mark.django_db
def test_an_unverified_email_never_links_even_where_linking_is_allowed(
    settings: Any, both: OIDCProvider, oidc_provider: OIDCProvider, vision: Team
) -> None:
    configure_both(settings, oidc_provider, both, link_by_verified_email=True)
    assert sign_in_at(Client(), oidc_provider, "corp", "mo").status_code == 302
    assert sign_in_at(Client(), both, "partner", "mo").status_code == 302
    corp_mo = User.objects.get(oidc_identities__subject="u-mo")
    partner_mo = User.objects.get(oidc_identities__subject="partner-mo")
    assert corp_mo.pk != partner_mo.pk  # two accounts: an unverified address proves nothing
    assert not AuditEvent.objects.filter(action="auth.identity_linked").exists()


@pytest.mark.django_db
def test_the_recheck_asks_the_provider_the_session_signed_in_with(
    settings: Any, both: OIDCProvider, vision: Team
) -> None:
    client = Client()
    assert sign_in_at(client, both, "partner", "nina").status_code == 302
    user = User.objects.get(oidc_identities__subject="partner-nina")
    assert user.memberships.filter(team=vision).exists()
    try:
        both.set_user("nina", groups=[])
        age_groups(user, settings.OIDC_GROUPS_MAX_AGE_SECONDS + 1)
        assert client.get("/accounts/profile/").status_code in (200, 302)
        # The partner's refresh grant and userinfo said: no group any more.
        assert not Membership.objects.filter(user=user, team=vision).exists()
    finally:
        both.reset_user("nina")
        both.set_user("nina", groups=PARTNER_GROUPS["nina"])


@pytest.mark.django_db
def test_signing_out_goes_to_the_end_session_of_the_provider_signed_in_with(
    both: OIDCProvider, vision: Team
) -> None:
    client = Client()
    assert sign_in_at(client, both, "partner", "alice").status_code == 302
    page = client.post("/accounts/logout/")
    text = page.content.decode()
    assert both.end_session_endpoint in text
    assert f"client_id={TEST_CLIENT_ID}" in text


@pytest.mark.django_db(transaction=True)
def test_a_partners_back_channel_logout_ends_its_session_and_a_stranger_issuers_is_refused(
    settings: Any, oidc_provider: OIDCProvider, partner: OIDCProvider, live_server: Any
) -> None:
    base = live_server.url
    client = partner.register_client(
        [f"{base}/oidc/callback/"],
        grant_types=["authorization_code", "refresh_token"],
        backchannel_logout_uri=f"{base}/oidc/backchannel-logout/",
        backchannel_logout_session_required=True,
    )
    configure_both(
        settings,
        oidc_provider,
        partner,
        client_id=client.client_id,
        client_secret=client.client_secret,
    )
    settings.OIDC_TOKEN_USE_BASIC_AUTH = False
    TeamFactory(name="Vision", idp_group="gpupaas-team-vision")
    portal, idp = requests.Session(), requests.Session()
    start = portal.get(
        f"{base}/oidc/authenticate/?provider=partner", allow_redirects=False, timeout=10
    )
    callback = login_via_provider(
        start.headers["Location"], "carol", partner.user("carol").password, session=idp
    )
    assert portal.get(callback, allow_redirects=False, timeout=10).status_code == 302
    assert portal.get(f"{base}/accounts/profile/", allow_redirects=False).status_code == 200

    sign_out_at_provider(idp, partner)  # the partner posts its logout token to the portal
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if portal.get(f"{base}/accounts/profile/", allow_redirects=False).status_code == 302:
            break
        time.sleep(0.2)
    assert portal.get(f"{base}/accounts/profile/", allow_redirects=False).status_code == 302

    stranger = requests.post(
        f"{base}/oidc/backchannel-logout/",
        data={"logout_token": _unsigned_token_from("https://stranger.example.com")},
        timeout=10,
    )
    assert stranger.status_code == 400
    assert stranger.json()["error_description"] == (
        "The token's issuer is not an identity provider of this portal."
    )


def _unsigned_token_from(issuer: str) -> str:
    import base64
    import json

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'kid': 'x'})}.{part({'iss': issuer, 'sub': 's'})}.c2ln"
