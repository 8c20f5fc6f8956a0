"""Helpers for tests that sign in through the loopback OpenID provider (tests/plugins/oidc.py):
the portal's settings for it, signing in with Django's test client or against a live server,
signing out at the provider, and signing tokens with a key of the test's own."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import requests
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from apps.accounts.models import User
from tests.plugins.oidc import TEST_CLIENT_ID, OIDCProvider, login_via_provider

OIDC_BACKEND = "apps.accounts.oidc.GpupaasOIDCBackend"


def configure(settings: Any, provider: OIDCProvider, client_id: str = TEST_CLIENT_ID) -> None:
    """Point the portal at ``provider`` (pytest-django's ``settings`` fixture)."""
    for key, value in provider.django_settings(client_id).items():
        setattr(settings, key, value)
    settings.OIDC_ENABLED = True
    settings.OIDC_ADMIN_GROUPS = ["gpupaas-admins"]
    settings.AUTHENTICATION_BACKENDS = [OIDC_BACKEND, "django.contrib.auth.backends.ModelBackend"]
    cache.clear()  # re-check retry marks and seen logout tokens of earlier tests


def sign_in(client: Client, provider: OIDCProvider, username: str) -> Any:
    """The code flow with Django's test client; returns the callback's response."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    callback = login_via_provider(start["Location"], username, provider.user(username).password)
    parts = urlsplit(callback)
    return client.get(f"{parts.path}?{parts.query}")


def serve_live_portal(settings: Any, provider: OIDCProvider, base: str) -> str:
    """Point the portal served at ``base`` (pytest-django's live server) at ``provider``
    through a client registered for it, with the portal's back-channel logout address, so the
    provider posts logout tokens there. Returns ``base``."""
    client = provider.register_client(
        [f"{base}/oidc/callback/"],
        grant_types=["authorization_code", "refresh_token"],
        backchannel_logout_uri=f"{base}/oidc/backchannel-logout/",
        backchannel_logout_session_required=True,
    )
    configure(settings, provider, client.client_id)
    settings.OIDC_TOKEN_USE_BASIC_AUTH = False  # the client registered client_secret_post
    return base


def live_sign_in(
    base: str, provider: OIDCProvider, username: str
) -> tuple[requests.Session, requests.Session]:
    """Sign in to a live portal at ``base``; returns the browser's portal and provider cookies
    (the latter to sign out at the provider later)."""
    portal, idp = requests.Session(), requests.Session()
    start = portal.get(f"{base}/oidc/authenticate/", allow_redirects=False, timeout=10)
    assert start.status_code == 302
    callback = login_via_provider(
        start.headers["Location"], username, provider.user(username).password, session=idp
    )
    done = portal.get(callback, allow_redirects=False, timeout=10)
    assert done.status_code == 302, done.text
    return portal, idp


def live_signed_in(portal: requests.Session, base: str) -> bool:
    page = portal.get(f"{base}/accounts/profile/", allow_redirects=False, timeout=10)
    return bool(page.status_code == 200)


def sign_out_at_provider(
    idp: requests.Session, provider: OIDCProvider, url: str | None = None
) -> requests.Response:
    """Sign-out at the provider's end-session page, as a user would do it there: RP-less, or
    through ``url`` (the end-session link a portal gave). Returns the confirmation's answer."""
    page = idp.get(url or provider.end_session_endpoint, timeout=10)
    xsrf = page.text.split('name="xsrf" value="', 1)[1].split('"', 1)[0]
    done = idp.post(
        f"{provider.issuer}/session/end/confirm",
        data={"xsrf": xsrf, "logout": "yes"},
        allow_redirects=False,
        timeout=10,
    )
    assert done.status_code in (200, 303), done.text
    return done


def age_groups(user: User, seconds: int) -> None:
    """Pretend the provider last confirmed ``user``'s groups ``seconds`` ago."""
    User.objects.filter(pk=user.pk).update(
        idp_checked_at=timezone.now() - timedelta(seconds=seconds)
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_jwt(key: rsa.RSAPrivateKey, payload: dict[str, Any], kid: str = "test") -> str:
    """A compact RS256 JWS of ``payload`` (a logout token by its ``typ``)."""
    header = {"alg": "RS256", "typ": "logout+jwt", "kid": kid}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"
