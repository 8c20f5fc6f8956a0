"""Notices people read: by default the portal shows what needs attention; the routine admitted,
running and finished go to a daily e-mail digest, grouped per workload, sent once a day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import Client, override_settings

from apps.notifications import core, selectors
from apps.notifications.models import DigestSent, Notice
from apps.notifications.services import notice_digests_send, notification_preferences_set, notify
from tests.plugins.cast import Cast

E = core.NoticeEvent
DAY = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
EMAIL = {
    "NOTIFY_EMAIL_ENABLED": True,
    "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
}


def test_by_default_the_portal_carries_what_needs_attention_and_the_digest_the_rest() -> None:
    prefs = core.default_preferences(email_address="lead@example.com")
    for event in (E.ADMITTED, E.RUNNING, E.FINISHED):
        assert core.channels_for(prefs, event) == {core.Channel.DIGEST}
    for event in (
        E.FAILED,
        E.PREEMPTED,
        E.IDLE_WARNING,
        E.QUOTA_REQUEST_DECIDED,
        E.RESERVATION_DECIDED,
        E.BUDGET_THRESHOLD,
    ):
        assert core.Channel.PORTAL in core.channels_for(prefs, event)
        assert core.Channel.DIGEST not in core.channels_for(prefs, event)
    # No address, no digest.
    assert core.channels_for(core.default_preferences(), E.RUNNING) == frozenset()


def test_digest_groups_notices_per_workload_in_order() -> None:
    at = DAY
    items = [
        core.DigestItem(E.ADMITTED, "train-a admitted", "/workloads/1/", at),
        core.DigestItem(E.ADMITTED, "train-b admitted", "/workloads/2/", at + timedelta(minutes=1)),
        core.DigestItem(E.RUNNING, "train-a running", "/workloads/1/", at + timedelta(minutes=2)),
        core.DigestItem(E.FINISHED, "train-a finished", "/workloads/1/", at + timedelta(hours=1)),
    ]
    groups = core.digest_groups(reversed(items))
    assert [g.link for g in groups] == ["/workloads/1/", "/workloads/2/"]
    assert [i.event for i in groups[0].items] == [E.ADMITTED, E.RUNNING, E.FINISHED]
    message = core.digest_message(
        groups=groups,
        day="2026-11-20",
        site_name="gpupaas",
        prefs_url="https://gpu.example.com/notifications/preferences/",
        absolute=lambda link: f"https://gpu.example.com{link}",
    )
    assert message.subject == "[gpupaas] 2026-11-20: 4 updates on 2 workloads"
    assert "- train-a finished (admitted 09:00, running 09:02, finished 10:00)" in message.text
    assert "https://gpu.example.com/workloads/1/" in message.text


def tell(cast: Cast, event: core.NoticeEvent, workload: int, at: datetime) -> None:
    notify(
        event=event,
        users=[cast.lead],
        title=f"train-{workload} {event.value}",
        body="",
        key=f"wl-{workload}-{event.value}",
        link=f"/workloads/{workload}/",
        team=cast.team,
    )
    Notice.objects.filter(key=f"wl-{workload}-{event.value}").update(created=at)


@pytest.mark.django_db
@override_settings(**EMAIL, PORTAL_URL="https://gpu.example.com")
def test_a_lead_reads_only_the_failure_and_gets_the_rest_in_one_digest_a_day(
    cast: Cast,
) -> None:
    cast.lead.email = "lead@example.com"
    cast.lead.save()
    for n in range(1, 8):  # 7 workloads admitted, running and finished: 21 routine notices
        for minutes, event in enumerate((E.ADMITTED, E.RUNNING, E.FINISHED)):
            tell(cast, event, n, DAY + timedelta(minutes=n * 3 + minutes))
    tell(cast, E.FAILED, 8, DAY + timedelta(hours=1))
    listed = list(selectors.notices_for(cast.lead))
    assert [n.event for n in listed] == ["failed"]
    assert selectors.unread_count(cast.lead) == 1

    assert notice_digests_send(now=DAY + timedelta(days=1, minutes=5)) == 1
    assert len(mail.outbox) == 1
    digest = mail.outbox[0]
    assert digest.to == ["lead@example.com"]
    assert digest.subject == "[gpupaas] 2026-11-20: 21 updates on 7 workloads"
    assert "https://gpu.example.com/workloads/3/" in str(digest.body)
    assert "failed" not in str(digest.body)
    # Hourly passes, a retry or a second worker: never twice the same day.
    assert notice_digests_send(now=DAY + timedelta(days=1, hours=1)) == 0
    assert len(mail.outbox) == 1 and DigestSent.objects.count() == 1


@pytest.mark.django_db
@override_settings(**EMAIL)
def test_the_digest_is_a_preference_like_the_others(cast: Cast) -> None:
    cast.lead.email = "lead@example.com"
    cast.lead.save()
    notification_preferences_set(
        actor=cast.lead,
        email_events=[],
        webhook_events=[],
        portal_events=["failed", "admitted"],
        digest_events=[],
        webhook_url="",
    )
    tell(cast, E.ADMITTED, 1, DAY)
    assert [n.event for n in selectors.notices_for(cast.lead)] == ["admitted"]
    assert notice_digests_send(now=DAY + timedelta(days=1)) == 0
    client = Client()
    client.force_login(cast.lead)
    page = client.get("/notifications/preferences/").content.decode()
    assert "In a daily e-mail digest" in page
    client.post(
        "/notifications/preferences/",
        {"portal_events": ["failed"], "digest_events": ["admitted", "finished"]},
    )
    prefs = selectors.preferences_of(cast.lead)
    assert prefs.events[core.Channel.DIGEST] == {E.ADMITTED, E.FINISHED}
    # A client that does not know the digest (the API of before) keeps the choice.
    notification_preferences_set(
        actor=cast.lead, email_events=[], webhook_events=[], portal_events=[], webhook_url=""
    )
    assert selectors.preferences_of(cast.lead).events[core.Channel.DIGEST] == {
        E.ADMITTED,
        E.FINISHED,
    }


def test_the_digest_is_scheduled_where_every_periodic_task_is(settings: Any) -> None:
    from gpupaas import celery

    names: list[str] = []

    class Sender:
        def add_periodic_task(self, seconds: float, signature: object, name: str) -> None:
            names.append(name)

        def signature(self, name: str) -> str:
            return name

    celery._schedule(Sender())  # type: ignore[arg-type]
    assert "notice digest" in names
