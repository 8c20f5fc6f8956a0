"""/api/v1/notifications/… and /api/v1/me/notification-preferences/."""

from __future__ import annotations

from typing import Any

import pytest

from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice
from apps.notifications.services import notify
from tests.api.conftest import Client
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

PREFS = "/api/v1/me/notification-preferences/"


def _tell(cast: Cast, key: str, title: str = "resnet failed") -> int:
    notify(
        event=NoticeEvent.FAILED,
        users=[cast.owner],
        title=title,
        body="Exit code 1.",
        key=key,
        link="/workloads/3/",
        team=cast.team,
    )
    return Notice.objects.get(user=cast.owner, key=key).pk


def test_my_notices_newest_first_and_unread_filter(cast: Cast, api: Client) -> None:
    first = _tell(cast, "a", "first")
    _tell(cast, "b", "second")
    client = api(cast.owner)
    body = client.get("/api/v1/notifications/").json()
    assert [n["title"] for n in body["results"]] == ["second", "first"]
    assert body["results"][0]["team"] == "vision"
    assert client.post(f"/api/v1/notifications/{first}/read/").json()["read_at"] is not None
    unread = client.get("/api/v1/notifications/?unread=true").json()
    assert [n["title"] for n in unread["results"]] == ["second"]
    bad = client.get("/api/v1/notifications/?unread=maybe")
    assert bad.status_code == 400 and bad.json()["fields"] == {"unread": ["Use true or false."]}


def test_mark_all_read_only_touches_mine(cast: Cast, api: Client) -> None:
    mine = _tell(cast, "a")
    notify(event=NoticeEvent.FAILED, users=[cast.outsider], title="x", body="", key="o")
    theirs = Notice.objects.get(user=cast.outsider).pk
    client = api(cast.owner)
    assert client.post(
        "/api/v1/notifications/read/", {"ids": [theirs, mine]}, format="json"
    ).json() == {"marked": 1}
    assert Notice.objects.get(pk=theirs).read_at is None
    assert client.get("/api/v1/notifications/", format="json").json()["count"] == 1
    assert api(cast.outsider).get("/api/v1/notifications/").json()["count"] == 1


@pytest.mark.parametrize(
    "body",
    [{"ids": ["x"]}, {"ids": [-1]}, {"ids": [10**30]}, {"ids": list(range(1, 1100))}, {"ids": "1"}],
)
def test_bad_ids_are_400s(cast: Cast, api: Client, body: dict[str, Any]) -> None:
    response = api(cast.owner).post("/api/v1/notifications/read/", body, format="json")
    assert response.status_code == 400
    assert "ids" in response.json()["fields"]


def test_preferences_round_trip(cast: Cast, api: Client) -> None:
    client = api(cast.owner)
    defaults = client.get(PREFS).json()
    assert "failed" in defaults["email_events"] and defaults["webhook_url"] == ""
    wanted = {
        "email_events": ["preempted"],
        "webhook_events": ["failed", "finished"],
        "portal_events": [],
        "webhook_url": "http://127.0.0.1:8080/hook",
    }
    assert client.put(PREFS, wanted, format="json").json() == wanted
    assert client.get(PREFS).json() == wanted


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"email_events": ["exploded"]}, "email_events", "not a valid choice"),
        ({"webhook_url": "https://10.0.0.1/x"}, "webhook_url", "private"),
        ({"webhook_url": "http://hooks.example.com/x"}, "webhook_url", "https"),
        ({"webhook_url": ""}, "webhook_url", "Give a webhook URL"),
        ({"webhook_url": "h" * 600}, "webhook_url", "500"),
    ],
)
def test_bad_preferences_are_400s_with_the_field(
    cast: Cast, api: Client, settings: Any, change: dict[str, Any], field: str, words: str
) -> None:
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK = False
    body = {
        "email_events": [],
        "webhook_events": ["failed"],
        "portal_events": [],
        "webhook_url": "https://hooks.example.com/x",
        **change,
    }
    response = api(cast.owner).put(PREFS, body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["fields"][field])
