"""The loopback OpenID provider (deploy/oidc-provider) really speaks OpenID Connect."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urljoin

import josepy
import pytest
import requests

from tests.plugins.oidc import (
    OTHER_CLIENT_ID,
    SHORT_CLIENT_ID,
    SHORT_ID_TOKEN_TTL,
    TEST_CLIENT_ID,
    TESTSERVER_CALLBACK,
    OIDCLoginError,
    OIDCProvider,
    callback_params,
    login_via_provider,
)

pytestmark = pytest.mark.oidc

BOB_GROUPS = ["gpupaas-team-vision", "gpupaas-team-nlp"]


def verified_claims(provider: OIDCProvider, id_token: str) -> dict[str, Any]:
    """Check the RS256 signature against the provider's JWKS and return the claims."""
    jws = josepy.JWS.from_compact(id_token.encode())
    header = jws.signature.combined
    assert header.alg == josepy.RS256
    keys = requests.get(provider.jwks_uri, timeout=10).json()["keys"]
    key = next(k for k in keys if k["kid"] == header.kid)
    assert jws.verify(josepy.JWKRSA.json_loads(json.dumps(key)))
    claims: dict[str, Any] = json.loads(jws.payload)
    return claims


def sign_in(
    provider: OIDCProvider,
    username: str,
    *,
    client_id: str = TEST_CLIENT_ID,
    redirect_uri: str = TESTSERVER_CALLBACK,
    nonce: str = "test-nonce",
) -> dict[str, Any]:
    """Code flow up to the token response."""
    url = provider.authorize_url(client_id=client_id, redirect_uri=redirect_uri, nonce=nonce)
    callback = login_via_provider(url, username, provider.user(username).password)
    assert callback.startswith(redirect_uri + "?")
    code = callback_params(callback)["code"]
    response = provider.exchange_code(code, client_id=client_id, redirect_uri=redirect_uri)
    assert response.status_code == 200, response.text
    tokens: dict[str, Any] = response.json()
    return tokens


def test_discovery_document_advertises_issuer_endpoints_and_groups_scope(
    oidc_provider: OIDCProvider,
) -> None:
    url = f"{oidc_provider.issuer}/.well-known/openid-configuration"
    doc = requests.get(url, timeout=10).json()

    assert doc["issuer"] == oidc_provider.issuer
    assert oidc_provider.issuer == f"http://127.0.0.1:{oidc_provider.port}"
    for name in (
        "authorization_endpoint",
        "token_endpoint",
        "userinfo_endpoint",
        "jwks_uri",
        "end_session_endpoint",
    ):
        assert doc[name].startswith(oidc_provider.issuer + "/")
    assert doc["response_types_supported"] == ["code"]
    assert {"openid", "email", "profile", "groups"} <= set(doc["scopes_supported"])
    assert "groups" in doc["claims_supported"]
    assert doc["id_token_signing_alg_values_supported"] == ["RS256"]
    assert {"client_secret_basic", "client_secret_post"} <= set(
        doc["token_endpoint_auth_methods_supported"]
    )


def test_jwks_publishes_an_rsa_signing_key(oidc_provider: OIDCProvider) -> None:
    keys = requests.get(oidc_provider.jwks_uri, timeout=10).json()["keys"]

    assert [(k["kty"], k["alg"], k["use"]) for k in keys] == [("RSA", "RS256", "sig")]
    assert "d" not in keys[0]


def test_code_flow_for_bob_returns_code_and_state_to_callback_without_fetching_it(
    oidc_provider: OIDCProvider,
) -> None:
    url = oidc_provider.authorize_url(state="xyz-123")

    callback = login_via_provider(url, "bob", oidc_provider.user("bob").password)

    assert callback.startswith("http://testserver/oidc/callback/?")
    params = callback_params(callback)
    assert params["state"] == "xyz-123"
    assert params["code"]
    assert params["iss"] == oidc_provider.issuer


def test_id_token_for_bob_is_rs256_signed_and_carries_audience_subject_and_groups(
    oidc_provider: OIDCProvider,
) -> None:
    tokens = sign_in(oidc_provider, "bob", nonce="n-0S6_WzA2Mj")

    assert tokens["token_type"].lower() == "bearer"
    claims = verified_claims(oidc_provider, tokens["id_token"])
    assert claims["iss"] == oidc_provider.issuer
    assert claims["aud"] == TEST_CLIENT_ID
    assert claims["sub"] == oidc_provider.user("bob").sub
    assert claims["nonce"] == "n-0S6_WzA2Mj"
    assert claims["groups"] == BOB_GROUPS
    assert claims["email"] == "bob@example.com"
    assert claims["email_verified"] is True
    assert claims["preferred_username"] == "bob"
    assert claims["name"] == "Bob Baker"
    assert claims["exp"] - claims["iat"] == 3600


def test_userinfo_returns_groups_and_profile_for_the_access_token(
    oidc_provider: OIDCProvider,
) -> None:
    tokens = sign_in(oidc_provider, "bob")

    response = requests.get(
        oidc_provider.userinfo_endpoint,
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    )

    assert response.status_code == 200, response.text
    info = response.json()
    assert info["sub"] == oidc_provider.user("bob").sub
    assert info["groups"] == BOB_GROUPS
    assert info["email"] == "bob@example.com"
    assert info["preferred_username"] == "bob"


def test_user_in_no_group_gets_an_empty_groups_claim(oidc_provider: OIDCProvider) -> None:
    tokens = sign_in(oidc_provider, "nobody")

    assert verified_claims(oidc_provider, tokens["id_token"])["groups"] == []


def test_each_user_gets_the_groups_of_the_test_config(oidc_provider: OIDCProvider) -> None:
    expected = {
        "alice": ["gpupaas-team-vision"],
        "carol": ["gpupaas-team-nlp"],
        "dave": [],
        "admin": ["gpupaas-admins"],
        "eve": BOB_GROUPS,
    }
    for username, groups in expected.items():
        claims = verified_claims(oidc_provider, sign_in(oidc_provider, username)["id_token"])
        assert (username, claims["groups"]) == (username, groups)


def test_token_endpoint_accepts_client_secret_basic_as_well_as_post(
    oidc_provider: OIDCProvider,
) -> None:
    url = oidc_provider.authorize_url()
    code = callback_params(login_via_provider(url, "alice", "alice-password"))["code"]

    response = oidc_provider.exchange_code(code, basic_auth=True)

    assert response.status_code == 200, response.text
    assert "id_token" in response.json()


def test_token_endpoint_rejects_a_wrong_client_secret(oidc_provider: OIDCProvider) -> None:
    url = oidc_provider.authorize_url()
    code = callback_params(login_via_provider(url, "alice", "alice-password"))["code"]

    response = requests.post(
        oidc_provider.token_endpoint,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": TESTSERVER_CALLBACK,
            "client_id": TEST_CLIENT_ID,
            "client_secret": "not-the-secret",
        },
        timeout=10,
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_authorization_code_can_be_redeemed_only_once(oidc_provider: OIDCProvider) -> None:
    url = oidc_provider.authorize_url()
    code = callback_params(login_via_provider(url, "alice", "alice-password"))["code"]

    assert oidc_provider.exchange_code(code).status_code == 200
    second = oidc_provider.exchange_code(code)

    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"


def test_wrong_password_shows_the_login_form_again_with_an_error(
    oidc_provider: OIDCProvider,
) -> None:
    session = requests.Session()
    form_page = session.get(oidc_provider.authorize_url(), timeout=10)
    assert form_page.status_code == 200
    assert 'name="login" id="login"' in form_page.text
    assert 'name="password" id="password"' in form_page.text
    assert '<button type="submit">Sign in</button>' in form_page.text
    assert '<label for="login">' in form_page.text
    assert '<label for="password">' in form_page.text
    action = form_page.url.rstrip("/") + "/login"

    retry = session.post(
        action, data={"login": "bob", "password": "wrong"}, allow_redirects=False, timeout=10
    )

    assert retry.status_code == 200
    assert 'role="alert"' in retry.text
    assert "Invalid username or password." in retry.text
    assert 'name="password" id="password"' in retry.text
    assert 'value="bob"' in retry.text


def test_login_helper_raises_when_the_provider_refuses_the_password(
    oidc_provider: OIDCProvider,
) -> None:
    with pytest.raises(OIDCLoginError, match="Invalid username or password"):
        login_via_provider(oidc_provider.authorize_url(), "bob", "wrong")


def test_unknown_user_is_refused(oidc_provider: OIDCProvider) -> None:
    with pytest.raises(OIDCLoginError, match="Invalid username or password"):
        login_via_provider(oidc_provider.authorize_url(), "mallory", "mallory-password")


def test_short_lived_client_gets_id_token_with_the_configured_lifetime(
    oidc_provider: OIDCProvider,
) -> None:
    tokens = sign_in(oidc_provider, "bob", client_id=SHORT_CLIENT_ID)

    claims = verified_claims(oidc_provider, tokens["id_token"])
    assert claims["aud"] == SHORT_CLIENT_ID
    assert claims["exp"] - claims["iat"] == SHORT_ID_TOKEN_TTL
    time.sleep(SHORT_ID_TOKEN_TTL + 1)
    assert claims["exp"] < time.time()


def test_second_client_gets_id_tokens_for_its_own_audience(oidc_provider: OIDCProvider) -> None:
    tokens = sign_in(oidc_provider, "bob", client_id=OTHER_CLIENT_ID)

    claims = verified_claims(oidc_provider, tokens["id_token"])
    assert claims["aud"] == OTHER_CLIENT_ID
    assert oidc_provider.client(OTHER_CLIENT_ID).client_id != TEST_CLIENT_ID


@pytest.mark.parametrize(
    "redirect_uri",
    ["http://127.0.0.1:54321/oidc/callback/", "http://localhost:8081/oidc/callback/"],
)
def test_loopback_callback_on_any_port_is_accepted_for_live_servers(
    oidc_provider: OIDCProvider, redirect_uri: str
) -> None:
    tokens = sign_in(oidc_provider, "carol", redirect_uri=redirect_uri)

    assert verified_claims(oidc_provider, tokens["id_token"])["groups"] == ["gpupaas-team-nlp"]


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "http://testserver/other/callback/",
        "http://attacker.example/oidc/callback/",
        "http://127.0.0.1:8000/elsewhere/",
    ],
)
def test_unregistered_redirect_uri_is_refused_at_the_provider(
    oidc_provider: OIDCProvider, redirect_uri: str
) -> None:
    url = oidc_provider.authorize_url(redirect_uri=redirect_uri)

    response = requests.get(url, timeout=10)
    assert response.status_code == 400
    assert "redirect_uri did not match" in response.text
    with pytest.raises(OIDCLoginError):
        login_via_provider(url, "bob", "bob-password")


def test_provider_session_signs_in_again_without_the_form(oidc_provider: OIDCProvider) -> None:
    session = requests.Session()
    login_via_provider(oidc_provider.authorize_url(), "eve", "eve-password", session=session)

    callback = login_via_provider(
        oidc_provider.authorize_url(state="again"), "ignored", "ignored", session=session
    )

    assert callback_params(callback)["state"] == "again"


def test_cancel_link_returns_access_denied_to_the_client(oidc_provider: OIDCProvider) -> None:
    session = requests.Session()
    form_page = session.get(oidc_provider.authorize_url(state="s1"), timeout=10)
    location = form_page.url.rstrip("/") + "/abort"
    while location.startswith(oidc_provider.issuer):
        response = session.get(location, allow_redirects=False, timeout=10)
        assert response.status_code == 303, response.text
        location = urljoin(location, response.headers["Location"])
    callback = location

    params = callback_params(callback)
    assert callback.startswith(TESTSERVER_CALLBACK)
    assert params["error"] == "access_denied"
    assert params["state"] == "s1"


def test_end_session_signs_out_and_returns_to_registered_post_logout_uri(
    oidc_provider: OIDCProvider,
) -> None:
    session = requests.Session()
    callback = login_via_provider(
        oidc_provider.authorize_url(), "bob", "bob-password", session=session
    )
    code = callback_params(callback)["code"]
    id_token = oidc_provider.exchange_code(code).json()["id_token"]

    page = session.get(
        oidc_provider.end_session_endpoint,
        params={
            "id_token_hint": id_token,
            "post_logout_redirect_uri": "http://testserver/",
            "state": "bye",
        },
        timeout=10,
    )
    assert page.status_code == 200
    assert 'id="op.logoutForm"' in page.text
    xsrf = page.text.split('name="xsrf" value="', 1)[1].split('"', 1)[0]
    done = session.post(
        f"{oidc_provider.issuer}/session/end/confirm",
        data={"xsrf": xsrf, "logout": "yes"},
        allow_redirects=False,
        timeout=10,
    )

    assert done.status_code == 303
    assert done.headers["Location"] == "http://testserver/?state=bye"
    with pytest.raises(OIDCLoginError, match="Invalid username or password"):
        # Signed out: the form is shown again instead of a silent sign-in.
        login_via_provider(oidc_provider.authorize_url(), "bob", "wrong", session=session)


def test_dynamically_registered_client_can_use_an_exact_redirect_uri(
    oidc_provider: OIDCProvider,
) -> None:
    redirect_uri = "http://portal.test:8443/oidc/callback/"
    client = oidc_provider.register_client([redirect_uri])
    url = oidc_provider.authorize_url(client_id=client.client_id, redirect_uri=redirect_uri)

    callback = login_via_provider(url, "dave", "dave-password")
    code = callback_params(callback)["code"]
    response = oidc_provider.exchange_code(
        code, client_id=client.client_id, redirect_uri=redirect_uri
    )

    assert response.status_code == 200, response.text
    claims = verified_claims(oidc_provider, response.json()["id_token"])
    assert claims["aud"] == client.client_id
    assert claims["groups"] == []


def test_django_settings_point_at_discovered_endpoints(oidc_provider: OIDCProvider) -> None:
    settings = oidc_provider.django_settings()

    assert settings["OIDC_RP_CLIENT_ID"] == TEST_CLIENT_ID
    assert settings["OIDC_RP_CLIENT_SECRET"] == oidc_provider.client().client_secret
    assert settings["OIDC_OP_TOKEN_ENDPOINT"] == oidc_provider.token_endpoint
    assert settings["OIDC_OP_JWKS_ENDPOINT"] == oidc_provider.jwks_uri
    assert settings["OIDC_RP_SIGN_ALGO"] == "RS256"


def test_groups_claim_can_be_one_string_or_left_out(oidc_provider: OIDCProvider) -> None:
    stan = verified_claims(oidc_provider, sign_in(oidc_provider, "stan")["id_token"])
    abby = verified_claims(oidc_provider, sign_in(oidc_provider, "abby")["id_token"])

    assert stan["groups"] == "/ml/vision"
    assert "groups" not in abby
    assert verified_claims(oidc_provider, sign_in(oidc_provider, "paula")["id_token"])[
        "groups"
    ] == ["/ml/vision", "/gpupaas-admins"]


def _refresh(provider: OIDCProvider, refresh_token: str) -> requests.Response:
    client = provider.client()
    return requests.post(
        provider.token_endpoint,
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": client.client_id,
            "client_secret": client.client_secret,
        },
        timeout=10,
    )


def _userinfo(provider: OIDCProvider, access_token: str) -> requests.Response:
    return requests.get(
        provider.userinfo_endpoint,
        headers={"Authorization": f"Bearer {access_token}"},
        timeout=10,
    )


def test_refresh_token_brings_current_groups_until_the_user_is_disabled(
    oidc_provider: OIDCProvider,
) -> None:
    tokens = sign_in(oidc_provider, "mo")
    assert tokens["refresh_token"]
    try:
        oidc_provider.set_user("mo", groups=["gpupaas-team-nlp"])
        refreshed = _refresh(oidc_provider, tokens["refresh_token"])
        assert refreshed.status_code == 200, refreshed.text
        info = _userinfo(oidc_provider, refreshed.json()["access_token"]).json()
        assert info["groups"] == ["gpupaas-team-nlp"]

        oidc_provider.set_user("mo", disabled=True)
        refused = _refresh(oidc_provider, tokens["refresh_token"])
        assert refused.status_code == 400
        assert refused.json()["error"] == "invalid_grant"
        assert _userinfo(oidc_provider, refreshed.json()["access_token"]).status_code == 401
        with pytest.raises(OIDCLoginError, match="Invalid username or password"):
            login_via_provider(oidc_provider.authorize_url(), "mo", "mo-password")
    finally:
        oidc_provider.reset_user("mo")


def test_refresh_token_ends_with_the_login_session(oidc_provider: OIDCProvider) -> None:
    session = requests.Session()
    callback = login_via_provider(
        oidc_provider.authorize_url(), "carol", "carol-password", session=session
    )
    tokens = oidc_provider.exchange_code(callback_params(callback)["code"]).json()
    page = session.get(oidc_provider.end_session_endpoint, timeout=10)
    xsrf = page.text.split('name="xsrf" value="', 1)[1].split('"', 1)[0]
    session.post(
        f"{oidc_provider.issuer}/session/end/confirm",
        data={"xsrf": xsrf, "logout": "yes"},
        allow_redirects=False,
        timeout=10,
    )

    assert _refresh(oidc_provider, tokens["refresh_token"]).status_code == 400


def test_discovery_advertises_back_channel_logout_with_sessions(
    oidc_provider: OIDCProvider,
) -> None:
    assert oidc_provider.discovery["backchannel_logout_supported"] is True
    assert oidc_provider.discovery["backchannel_logout_session_supported"] is True
    assert "refresh_token" in oidc_provider.discovery["grant_types_supported"]


def test_ending_every_session_stops_refreshes_and_sso_and_sends_no_logout_token(
    oidc_provider: OIDCProvider,
) -> None:
    """Like Keycloak's realm action "Sign out all active sessions": the sessions end, their
    refresh tokens are refused as "Session not active", the provider's cookie signs nobody in,
    userinfo refuses the sessions' access tokens (Keycloak's checks the session too), and no
    client hears of it: nothing is posted to a back-channel logout URI."""
    session = requests.Session()
    callback = login_via_provider(
        oidc_provider.authorize_url(), "carol", "carol-password", session=session
    )
    tokens = oidc_provider.exchange_code(callback_params(callback)["code"]).json()
    assert oidc_provider.end_all_sessions() >= 1
    refused = _refresh(oidc_provider, tokens["refresh_token"])
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_grant",
        "error_description": "Session not active",
    }
    with pytest.raises(OIDCLoginError):  # the login form again, not a callback
        login_via_provider(oidc_provider.authorize_url(), "ignored", "ignored", session=session)
    assert _userinfo(oidc_provider, tokens["access_token"]).status_code == 401
