"""OpenID Connect Back-Channel Logout 1.0: the endpoint's checks on plain tokens signed by a test
key, and the whole round trip with the real provider posting to a live portal."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.test import Client

from apps.accounts import core
from apps.accounts.models import OidcIdentity, User, UserSession
from apps.accounts.services import user_session_record
from apps.audit.models import AuditEvent
from tests.accounts.oidc_helpers import (
    OIDC_BACKEND,
    configure,
    live_sign_in,
    live_signed_in,
    serve_live_portal,
    sign_jwt,
    sign_out_at_provider,
)
from tests.factories import TeamFactory, UserFactory
from tests.plugins.oidc import callback_params, login_via_provider

pytestmark = [pytest.mark.oidc]

URL = "/oidc/backchannel-logout/"

Signer = Callable[..., str]


# --- the endpoint, with a test signing key ------------------------------------------------------


@pytest.fixture
def signer(settings: Any, oidc_provider: Any, db: None) -> Signer:
    """Tokens signed by a key the portal trusts (OIDC_RP_IDP_SIGN_KEY), claims of a good
    logout token unless overridden."""
    configure(settings, oidc_provider)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    settings.OIDC_RP_IDP_SIGN_KEY = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )

    def make(drop: tuple[str, ...] = (), **override: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": settings.OIDC_OP_ISSUER,
            "aud": settings.OIDC_RP_CLIENT_ID,
            "iat": now,
            "exp": now + 120,
            "jti": f"jti-{time.monotonic_ns()}",
            "sub": "u-kim",
            "sid": "sid-1",
            "events": {core.BACKCHANNEL_LOGOUT_EVENT: {}},
            **override,
        }
        return sign_jwt(key, {k: v for k, v in payload.items() if k not in drop})

    return make


def _signed_in(user: User, issuer: str, sid: str) -> Client:
    client = Client()
    client.force_login(user, backend=OIDC_BACKEND)
    user_session_record(user=user, session_key=client.session.session_key, issuer=issuer, sid=sid)
    return client


@pytest.fixture
def kim(settings: Any, signer: Signer) -> User:
    user = UserFactory(username="kim")
    OidcIdentity.objects.create(user=user, issuer=settings.OIDC_OP_ISSUER, subject="u-kim")
    return user


def _alive(client: Client) -> bool:
    return client.get("/accounts/profile/").status_code == 200


@pytest.mark.django_db
def test_logout_token_ends_the_sessions_of_its_provider_session_only(
    settings: Any, signer: Signer, kim: User
) -> None:
    first = _signed_in(kim, settings.OIDC_OP_ISSUER, "sid-1")
    second = _signed_in(kim, settings.OIDC_OP_ISSUER, "sid-2")
    response = Client().post(URL, {"logout_token": signer(sid="sid-1")})
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    assert not _alive(first)
    assert _alive(second)
    assert AuditEvent.objects.filter(action="auth.backchannel_logout", object_id=str(kim.pk))


@pytest.mark.django_db
def test_logout_token_without_sid_ends_every_session_of_the_subject(
    settings: Any, signer: Signer, kim: User
) -> None:
    first = _signed_in(kim, settings.OIDC_OP_ISSUER, "sid-1")
    second = _signed_in(kim, settings.OIDC_OP_ISSUER, "")
    other = UserFactory(username="lou")
    OidcIdentity.objects.create(user=other, issuer=settings.OIDC_OP_ISSUER, subject="u-lou")
    bystander = _signed_in(other, settings.OIDC_OP_ISSUER, "sid-9")
    assert Client().post(URL, {"logout_token": signer(drop=("sid",))}).status_code == 200
    assert not _alive(first)
    assert not _alive(second)
    assert _alive(bystander)
    assert not UserSession.objects.filter(user=kim).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({"nonce": "n"}, "nonce"),
        ({"drop": ("events",)}, "not a logout token"),
        ({"aud": "gpupaas-other"}, "audience"),
        ({"iss": "http://127.0.0.1:1"}, "issued by"),
        ({"iat": int(time.time()) + 3600}, "future"),
        ({"drop": ("sub", "sid")}, "neither"),
    ],
    ids=["nonce", "no-event", "audience", "issuer", "future", "nobody"],
)
def test_bad_logout_token_is_refused_with_400_and_ends_nothing(
    settings: Any, signer: Signer, kim: User, case: dict[str, Any], message: str
) -> None:
    session = _signed_in(kim, settings.OIDC_OP_ISSUER, "sid-1")
    response = Client().post(URL, {"logout_token": signer(**case)})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert message in response.json()["error_description"]
    assert _alive(session)


@pytest.mark.django_db
def test_replayed_logout_token_is_refused(settings: Any, signer: Signer, kim: User) -> None:
    token = signer()
    assert Client().post(URL, {"logout_token": token}).status_code == 200
    again = Client().post(URL, {"logout_token": token})
    assert again.status_code == 400
    assert "already used" in again.json()["error_description"]


@pytest.mark.django_db
def test_missing_or_malformed_logout_token_is_refused(signer: Signer) -> None:
    assert Client().post(URL, {}).status_code == 400
    assert Client().post(URL, {"logout_token": "not.a.jwt"}).status_code == 400
    assert Client().get(URL).status_code == 405


# --- against the provider's keys ----------------------------------------------------------------


@pytest.fixture
def provider_keys(settings: Any, oidc_provider: Any, db: None) -> Any:
    configure(settings, oidc_provider)
    return oidc_provider


def test_token_forged_with_the_providers_key_id_is_refused(provider_keys: Any) -> None:
    kid = requests.get(provider_keys.jwks_uri, timeout=10).json()["keys"][0]["kid"]
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    token = sign_jwt(
        forger,
        {
            "iss": provider_keys.issuer,
            "aud": provider_keys.client().client_id,
            "iat": now,
            "jti": "forged",
            "sub": "u-alice",
            "events": {core.BACKCHANNEL_LOGOUT_EVENT: {}},
        },
        kid=kid,
    )
    response = Client().post(URL, {"logout_token": token})
    assert response.status_code == 400
    assert "verification failed" in response.json()["error_description"]


def test_an_id_token_is_not_a_logout_token(provider_keys: Any) -> None:
    url = provider_keys.authorize_url(nonce="n-1")
    callback = login_via_provider(url, "alice", provider_keys.user("alice").password)
    code = callback_params(callback)["code"]
    id_token = provider_keys.exchange_code(code).json()["id_token"]
    response = Client().post(URL, {"logout_token": id_token})
    assert response.status_code == 400
    assert "not a logout token" in response.json()["error_description"]


# --- the round trip: sign in through the provider, sign out there -------------------------------


@pytest.fixture
def live_portal(settings: Any, oidc_provider: Any, live_server: Any) -> str:
    TeamFactory(name="Vision", idp_group="gpupaas-team-vision")
    return serve_live_portal(settings, oidc_provider, live_server.url)


@pytest.mark.django_db(transaction=True)
def test_signing_out_at_the_provider_ends_that_portal_session(
    live_portal: str, oidc_provider: Any
) -> None:
    portal, idp = live_sign_in(live_portal, oidc_provider, "alice")
    other_portal, _ = live_sign_in(live_portal, oidc_provider, "alice")
    assert live_signed_in(portal, live_portal)
    user = User.objects.get(oidc_identities__subject="u-alice")
    sids = set(UserSession.objects.filter(user=user).values_list("sid", flat=True))
    assert len(sids) == 2 and "" not in sids  # one provider session each
    sign_out_at_provider(idp, oidc_provider)
    assert not live_signed_in(portal, live_portal)
    # The other browser signed in with its own provider session, which goes on.
    assert live_signed_in(other_portal, live_portal)
    assert AuditEvent.objects.filter(action="auth.backchannel_logout", object_id=str(user.pk))
