from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership
from tests.api.conftest import Client
from tests.factories import TeamFactory, UserFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_teams_lists_mine_with_my_role(cast: Cast, api: Client) -> None:
    response = api(cast.lead, ("read",)).get("/api/v1/teams/")
    assert response.json() == [
        {"slug": "vision", "name": "Vision", "namespace": "team-vision", "role": "lead"}
    ]


def test_admin_sees_every_team(cast: Cast, api: Client) -> None:
    TeamFactory(name="Robotics")
    slugs = [t["slug"] for t in api(cast.admin).get("/api/v1/teams/").json()]
    assert slugs == ["nlp", "robotics", "vision"]


def test_members_of_my_team(cast: Cast, api: Client) -> None:
    members = api(cast.teammate).get("/api/v1/teams/vision/members/").json()
    assert [(m["username"], m["role"]) for m in members] == [
        ("lead", "lead"),
        ("owner", "member"),
        ("teammate", "member"),
    ]


def test_lead_adds_and_removes_a_member(cast: Cast, api: Client) -> None:
    UserFactory(username="newbie")
    client = api(cast.lead)
    added = client.post("/api/v1/teams/vision/members/", {"username": "newbie"}, format="json")
    assert added.status_code == 200
    assert added.json()["role"] == "member"
    assert Membership.objects.filter(user__username="newbie", team=cast.team).exists()
    assert client.delete("/api/v1/teams/vision/members/newbie/").status_code == 204
    assert not Membership.objects.filter(user__username="newbie").exists()


def test_member_cannot_change_members(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/teams/vision/members/", {"username": "teammate", "role": "lead"}, format="json"
    )
    assert response.status_code == 403
    assert Membership.objects.get(user=cast.teammate).role == "member"


def test_adding_an_unknown_user_names_the_field(cast: Cast, api: Client) -> None:
    response = api(cast.lead).post(
        "/api/v1/teams/vision/members/", {"username": "ghost"}, format="json"
    )
    assert response.status_code == 400
    assert "username" in response.json()["fields"]


def test_token_created_over_the_api_is_shown_once_and_works(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/tokens/",
        {"name": "ci", "scopes": ["read"], "expires_in_days": 7},
        format="json",
    )
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    plaintext = response.json()["token"]
    token = ApiToken.objects.get(pk=response.json()["id"])
    assert token.digest == core.token_digest(plaintext)
    assert token.expires_at is not None
    fresh = APIClient()
    fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert fresh.get("/api/v1/me/").json()["username"] == "owner"
    listed = api(cast.owner).get("/api/v1/tokens/").json()
    assert plaintext not in str(listed)
    assert "ci" in [t["name"] for t in listed]


def test_token_with_unknown_scope_is_refused(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post(
        "/api/v1/tokens/", {"name": "x", "scopes": ["admin"]}, format="json"
    )
    assert response.status_code == 400
    assert "scopes" in response.json()["fields"]
