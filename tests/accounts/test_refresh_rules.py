"""When the portal uses the provider's refresh token again, how it reads a refusal, and the
end-session link (pure rules in apps.accounts.core)."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

from apps.accounts import core


def _jwt(payload: dict[str, object]) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'HS256'})}.{part(payload)}.c2ln"


def test_refresh_is_due_half_way_through_refresh_expires_in() -> None:
    tokens = {"refresh_token": "opaque", "refresh_expires_in": 1800}
    assert core.refresh_due_at(tokens, now=1000.0) == 1900.0


def test_refresh_is_due_half_way_to_a_jwt_refresh_tokens_exp() -> None:
    tokens = {"refresh_token": _jwt({"exp": 1600})}
    assert core.refresh_due_at(tokens, now=1000.0) == 1300.0


def test_no_lifetime_no_refresh_schedule() -> None:
    assert core.refresh_due_at({"refresh_token": "opaque"}, now=1000.0) is None
    # Keycloak's offline tokens without a limit say refresh_expires_in: 0.
    assert core.refresh_due_at({"refresh_token": "x", "refresh_expires_in": 0}, now=1.0) is None
    assert core.refresh_due_at({"refresh_expires_in": 60}, now=1.0) is None
    assert core.refresh_due_at({"refresh_token": "a.b.c"}, now=1.0) is None  # not a JWT


def test_refresh_due() -> None:
    assert not core.refresh_due(due_at=None, now=10.0)
    assert not core.refresh_due(due_at=11.0, now=10.0)
    assert core.refresh_due(due_at=10.0, now=10.0)


def test_refusals_that_say_the_user_is_gone() -> None:
    assert core.refusal_means_user_gone("invalid_grant", "User disabled")
    assert core.refusal_means_user_gone("invalid_grant", "User not found")
    assert core.refusal_means_user_gone(
        "invalid_grant", "AADSTS50057: The user account is disabled."
    )
    assert not core.refusal_means_user_gone("invalid_grant", "Token is not active")
    assert not core.refusal_means_user_gone("invalid_grant", "Session not active")
    assert not core.refusal_means_user_gone("invalid_client", "User disabled")


def test_end_session_url_carries_the_hint_and_the_way_back() -> None:
    url = core.end_session_url(
        "https://idp.example/logout?realm=x",
        id_token_hint="a.b.c",
        post_logout_redirect_uri="https://portal.example/",
        client_id="gpupaas",
    )
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert query["realm"] == ["x"]
    assert query["id_token_hint"] == ["a.b.c"]
    assert query["post_logout_redirect_uri"] == ["https://portal.example/"]
    assert query["client_id"] == ["gpupaas"]
    assert (
        core.end_session_url("", id_token_hint="", post_logout_redirect_uri="/", client_id="c")
        == ""
    )
    without_hint = core.end_session_url(
        "https://idp.example/logout", id_token_hint="", post_logout_redirect_uri="/", client_id="c"
    )
    assert "id_token_hint" not in without_hint
