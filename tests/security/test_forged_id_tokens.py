"""Forged ID and logout tokens that answered with HTTP 500 and a traceback: an unsigned
(``alg: none``) token at the callback, and the same at the back-channel logout endpoint, which
anyone can call without signing in."""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from apps.accounts.oidc import GpupaasOIDCBackend
from tests.accounts.oidc_helpers import configure
from tests.plugins.oidc import TEST_CLIENT_ID, OIDCProvider

pytestmark = [pytest.mark.oidc, pytest.mark.django_db]


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode("ascii")


def _unsigned(payload: dict[str, Any], typ: str = "JWT") -> str:
    return f"{_b64({'alg': 'none', 'typ': typ})}.{_b64(payload)}."


@pytest.fixture
def oidc(settings: Any, oidc_provider: OIDCProvider) -> OIDCProvider:
    configure(settings, oidc_provider)
    return oidc_provider


def _claims(oidc: OIDCProvider, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": oidc.issuer,
        "aud": TEST_CLIENT_ID,
        "sub": "u-alice",
        "iat": now,
        "exp": now + 300,
        **extra,
    }


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "HS256"])
def test_unsigned_id_token_at_the_callback_is_refused_with_a_page_not_a_500(
    oidc: OIDCProvider, alg: str
) -> None:
    client = Client(raise_request_exception=False)
    start = client.get("/oidc/authenticate/")
    state = client.session["oidc_states"]
    ((state_value, entry),) = state.items()
    header = _b64({"alg": alg, "typ": "JWT"})
    token = f"{header}.{_b64(_claims(oidc, nonce=entry['nonce']))}."
    tokens = {"id_token": token, "access_token": "forged", "token_type": "Bearer"}
    with mock.patch.object(GpupaasOIDCBackend, "get_token", return_value=tokens):
        response = client.get("/oidc/callback/", {"code": "c", "state": state_value})
    assert start.status_code == 302
    assert response.status_code == 400, response.content[:500]
    assert "Sign-in failed" in response.content.decode()
    assert "signed" in response.content.decode()


@pytest.mark.parametrize("alg", ["none", "None", "HS256"])
def test_unsigned_logout_token_at_the_back_channel_is_refused_with_400_not_a_500(
    oidc: OIDCProvider, alg: str
) -> None:
    payload = _claims(
        oidc,
        jti="forged-1",
        sid="s1",
        events={"http://schemas.openid.net/event/backchannel-logout": {}},
    )
    header = _b64({"alg": alg, "typ": "logout+jwt"})
    response = Client(raise_request_exception=False).post(
        "/oidc/backchannel-logout/", {"logout_token": f"{header}.{_b64(payload)}."}
    )
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["error"] == "invalid_request"
    assert "signed" in body["error_description"]


@pytest.mark.parametrize(
    "token", ["", "a", "a.b", "a.b.c", "..", "e30.e30.", "!!.??.##", "x" * 5000]
)
def test_garbage_logout_token_is_refused_with_400(oidc: OIDCProvider, token: str) -> None:
    response = Client(raise_request_exception=False).post(
        "/oidc/backchannel-logout/", {"logout_token": token}
    )
    assert response.status_code == 400, response.content[:500]
