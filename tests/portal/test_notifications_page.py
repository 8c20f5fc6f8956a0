"""The portal's notices: the count in the menu, the list, marking read, preferences."""

from __future__ import annotations

from typing import Any

import pytest

from apps.notifications import selectors, services
from apps.notifications.core import Channel, NoticeEvent
from apps.notifications.models import Notice
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def _tell(portal: Portal, key: str = "k1", title: str = "train-1 failed") -> None:
    services.notify(
        event=NoticeEvent.FAILED,
        users=[portal.cast.owner],
        title=title,
        body="Exit code 1.",
        key=key,
        link="/workloads/1/",
    )


def test_the_menu_counts_unread_notices_and_the_list_shows_them(portal: Portal) -> None:
    _tell(portal)
    _tell(portal, key="k2", title="<b>bold</b> finished")
    client = portal.client(portal.cast.owner)
    home = client.get("/").content.decode()
    assert 'aria-label="2 unread">2</span>' in home
    page = client.get("/notifications/").content.decode()
    assert "train-1 failed" in page and "&lt;b&gt;bold&lt;/b&gt; finished" in page
    assert page.index("bold") < page.index("train-1 failed")  # newest first


def test_marking_one_and_then_all_read(portal: Portal) -> None:
    _tell(portal)
    _tell(portal, key="k2")
    client = portal.client(portal.cast.owner)
    first = Notice.objects.filter(user=portal.cast.owner).first()
    assert first is not None
    response = client.post("/notifications/read/", {"id": first.pk})
    assert response.status_code == 302
    assert selectors.unread_count(portal.cast.owner) == 1
    client.post("/notifications/read/")
    assert selectors.unread_count(portal.cast.owner) == 0
    assert "unread" not in client.get("/").content.decode().split("<main")[0]


def test_nobody_marks_or_sees_another_users_notices(portal: Portal) -> None:
    _tell(portal)
    notice = Notice.objects.get()
    outsider = portal.client(portal.cast.outsider)
    assert outsider.post("/notifications/read/", {"id": notice.pk}).status_code == 302
    assert "train-1 failed" not in outsider.get("/notifications/").content.decode()
    notice.refresh_from_db()
    assert notice.read_at is None


def test_junk_ids_are_ignored(portal: Portal) -> None:
    _tell(portal)
    client = portal.client(portal.cast.owner)
    for junk in ["abc", "-1", "9" * 40, "١"]:
        assert client.post("/notifications/read/", {"id": junk}).status_code == 302
    assert selectors.unread_count(portal.cast.owner) == 1


def test_preferences_are_saved_and_shown(portal: Portal, settings: Any) -> None:
    settings.NOTIFY_EMAIL_ENABLED = True
    client = portal.client(portal.cast.owner)
    page = client.get("/notifications/preferences/").content.decode()
    assert f"Sent to {portal.cast.owner.email}." in page
    response = client.post(
        "/notifications/preferences/",
        {
            "portal_events": ["failed", "finished"],
            "email_events": ["preempted"],
            "webhook_events": ["failed"],
            "webhook_url": "http://127.0.0.1:9999/hook",
        },
    )
    assert response.status_code == 302
    prefs = selectors.preferences_of(portal.cast.owner)
    assert prefs.events[Channel.PORTAL] == {NoticeEvent.FAILED, NoticeEvent.FINISHED}
    assert prefs.webhook_url == "http://127.0.0.1:9999/hook"
    page = client.get("/notifications/preferences/").content.decode()
    assert 'value="http://127.0.0.1:9999/hook"' in page


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://169.254.169.254/latest/meta-data", "private"),
        ("http://hooks.example.com/x", "https"),
        ("javascript:alert(1)", "https"),
    ],
)
def test_a_webhook_the_platform_will_not_call_is_a_form_error(
    portal: Portal, settings: Any, url: str, message: str
) -> None:
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK = False
    client = portal.client(portal.cast.owner)
    response = client.post(
        "/notifications/preferences/", {"webhook_events": ["failed"], "webhook_url": url}
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert message in body
    assert 'role="alert"' in body


def test_anonymous_users_are_sent_to_sign_in(portal: Portal) -> None:
    from django.test import Client

    for path in ["/notifications/", "/notifications/preferences/"]:
        response = Client().get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
