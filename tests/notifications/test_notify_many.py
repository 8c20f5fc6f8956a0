"""``notify_many`` tells each user what ``notify`` would, in a few statements for all."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import User
from apps.notifications import services
from apps.notifications.models import Notice, NotificationPreference
from tests.factories import UserFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def _people() -> list[User]:
    portal_only = UserFactory(username="portal-only")
    everything = UserFactory(username="everything")
    NotificationPreference.objects.create(
        user=everything,
        portal_events=["failed"],
        email_events=["failed"],
        webhook_events=["failed"],
        webhook_url="https://hooks.example.com/x",
    )
    nothing = UserFactory(username="nothing")
    NotificationPreference.objects.create(user=nothing)
    gone = UserFactory(username="gone", is_active=False)
    return [portal_only, everything, nothing, gone]


def _told(key: str) -> list[tuple[object, ...]]:
    return sorted(
        (n.user.username, n.event, n.title, n.body, n.link, n.in_portal, n.team_id,
         sorted(n.deliveries.values_list("channel", "target")))
        for n in Notice.objects.filter(key=key).select_related("user")
    )  # fmt: skip


@override_settings(NOTIFY_EMAIL_ENABLED=True)
def test_many_tells_each_user_what_notify_tells_them(cast: Cast) -> None:
    people = _people()
    told_before = people[0]
    services.notify(event="failed", users=[told_before], title="t", body="b", key="many")
    services.notify(
        event="failed", users=people, title="Job x failed", body="Exit 1.", key="one",
        link="/workloads/1/", team=cast.team,
    )  # fmt: skip
    created = services.notify_many(
        [
            services.Notification(
                "failed", user, "Job x failed", "Exit 1.", "many", "/workloads/1/", cast.team
            )
            for user in [*people, people[1]]  # the same user and key twice: told once
        ]
    )
    assert created == 2  # everything and nothing; portal-only was told before, gone is inactive
    one = [row for row in _told("one") if row[0] != told_before.username]
    many = [row for row in _told("many") if row[0] != told_before.username]
    assert many == one
    assert [row[0] for row in many] == ["everything", "nothing"]
    assert many[0][-1] == [
        ("email", "everything@example.com"),
        ("webhook", "https://hooks.example.com/x"),
    ]
    assert Notice.objects.filter(key="many", user=told_before).get().title == "t"


def test_many_takes_the_same_statements_for_one_user_or_twenty() -> None:
    def statements(count: int) -> int:
        users = [UserFactory() for _ in range(count)]
        notes = [services.Notification("running", u, "t", "b", f"k-{count}") for u in users]
        with CaptureQueriesContext(connection) as queries:
            assert services.notify_many(notes) == count
        return len(queries)

    assert statements(1) == statements(20)


def test_bad_input_is_refused_before_anything_is_written() -> None:
    user = UserFactory()
    with pytest.raises(ValueError):
        services.notify_many([services.Notification("no-such-event", user, "t", "b", "k")])
    with pytest.raises(ValueError):
        services.notify_many([services.Notification("running", user, "t", "b", "")])
    assert not Notice.objects.exists()
