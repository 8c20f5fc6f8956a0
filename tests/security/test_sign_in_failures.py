"""Tried with a stock Keycloak realm: sign-in failed with "Invalid scopes: openid email profile
groups" and nothing said how to fix it (the realm has no ``groups`` client scope). The failure
page now names the fix."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.accounts import core
from tests.accounts.oidc_helpers import configure
from tests.plugins.oidc import OIDCProvider


def test_invalid_scope_failure_names_the_fix() -> None:
    fix = core.sign_in_failure_fix("invalid_scope", "Invalid scopes: openid email profile groups")
    assert "create a client scope named groups with a Group Membership mapper" in fix
    assert "OIDC_RP_SCOPES" in fix
    assert core.sign_in_failure_fix("access_denied", "no") == ""


@pytest.mark.oidc
@pytest.mark.django_db
def test_keycloak_invalid_scopes_page_names_the_fix(
    settings: Any, oidc_provider: OIDCProvider
) -> None:
    configure(settings, oidc_provider)
    client = Client()
    client.get("/oidc/authenticate/")
    response = client.get(
        "/oidc/callback/",
        {
            "error": "invalid_scope",
            "error_description": "Invalid scopes: openid email profile groups",
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Invalid scopes: openid email profile groups" in page
    assert "create a client scope named groups with a Group Membership mapper" in page
