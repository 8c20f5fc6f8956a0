from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def dev_login(settings: Any) -> None:
    settings.DEBUG = True
    settings.DEV_LOGIN_ENABLED = True
    settings.OIDC_ENABLED = False
    settings.DEV_LOGIN_USERS = ["owner", "admin"]


def test_dev_login_signs_in_a_demo_user(dev_login: None, cast: Cast) -> None:
    client = Client()
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in as owner" in page
    response = client.post(
        "/accounts/dev-login/", {"username": "owner", "next": "/accounts/tokens/"}
    )
    assert response["Location"] == "/accounts/tokens/"
    assert client.get("/").status_code == 200


def test_dev_login_refuses_users_not_in_the_demo_cast(dev_login: None, cast: Cast) -> None:
    assert Client().post("/accounts/dev-login/", {"username": "outsider"}).status_code == 404


@pytest.mark.parametrize("evil", ["//evil.example", "/\\evil.example", "https://evil.example"])
def test_dev_login_next_stays_on_site(dev_login: None, cast: Cast, evil: str) -> None:
    response = Client().post("/accounts/dev-login/", {"username": "owner", "next": evil})
    assert response["Location"] == "/"


def test_dev_login_is_impossible_with_debug_off(settings: Any, cast: Cast) -> None:
    settings.DEBUG = False
    settings.DEV_LOGIN_ENABLED = True  # even if someone forces the flag
    settings.DEV_LOGIN_USERS = ["owner"]
    client = Client()
    assert client.post("/accounts/dev-login/", {"username": "owner"}).status_code == 404
    assert "Sign in as" not in client.get("/accounts/login/").content.decode()
    assert client.get("/")["Location"].startswith("/accounts/login/")


def test_dev_login_is_impossible_when_oidc_is_configured(settings: Any, cast: Cast) -> None:
    settings.DEBUG = True
    settings.DEV_LOGIN_ENABLED = True
    settings.OIDC_ENABLED = True
    settings.DEV_LOGIN_USERS = ["owner"]
    assert Client().post("/accounts/dev-login/", {"username": "owner"}).status_code == 404


def test_logout_requires_post(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    assert client.get("/accounts/logout/").status_code == 405
    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"
    assert client.get("/")["Location"].startswith("/accounts/login/")


def test_anonymous_is_sent_to_login_with_next(cast: Cast) -> None:
    response = Client().get("/accounts/tokens/")
    assert response["Location"] == "/accounts/login/?next=/accounts/tokens/"
