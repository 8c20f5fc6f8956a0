"""notify(): one notice per (user, key), preferences honoured, delivery queued on commit."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from apps.audit.models import AuditEvent
from apps.notifications import core, selectors, services
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Delivery, Notice
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]


def _notify(cast: Cast, key: str = "workload-1-failed", **kwargs: Any) -> int:
    args: dict[str, Any] = {
        "event": NoticeEvent.FAILED,
        "users": [cast.owner, cast.teammate],
        "title": "train-1 failed",
        "body": "Exit code 1.",
        "key": key,
        "link": "/workloads/1/",
        "team": cast.team,
    }
    args.update(kwargs)
    return services.notify(**args)


def test_a_notice_is_made_once_per_user_and_key(cast: Cast) -> None:
    assert _notify(cast) == 2
    assert _notify(cast) == 0
    assert _notify(cast, users=[cast.owner, cast.lead]) == 1
    assert Notice.objects.filter(key="workload-1-failed").count() == 3
    assert _notify(cast, key="workload-1-finished") == 2


def test_the_same_user_twice_in_one_call_is_told_once(cast: Cast) -> None:
    assert _notify(cast, users=[cast.owner, cast.owner]) == 1


def test_inactive_users_are_not_told(cast: Cast) -> None:
    cast.teammate.is_active = False
    cast.teammate.save()
    assert _notify(cast) == 1


def test_unknown_events_and_bad_keys_are_refused(cast: Cast) -> None:
    with pytest.raises(ValueError):
        _notify(cast, event="exploded")
    with pytest.raises(ValueError):
        _notify(cast, key="")
    with pytest.raises(ValueError):
        _notify(cast, key="k" * 201)


def test_long_titles_are_clipped_not_refused(cast: Cast) -> None:
    _notify(cast, title="x" * 1000, users=[cast.owner])
    notice = Notice.objects.get(user=cast.owner)
    assert len(notice.title) == core.TITLE_MAX_LENGTH
    assert notice.title.endswith("…")


@override_settings(NOTIFY_EMAIL_ENABLED=True)
def test_deliveries_follow_preferences_and_are_queued_on_commit(
    cast: Cast, django_capture_on_commit_callbacks: Capture
) -> None:
    cast.owner.email = "owner@example.com"
    cast.owner.save()
    services.notification_preferences_set(
        actor=cast.owner,
        email_events=["failed"],
        webhook_events=["failed", "running"],
        portal_events=["running"],
        webhook_url="http://127.0.0.1:9/hook",
    )
    with django_capture_on_commit_callbacks() as callbacks:
        _notify(cast, users=[cast.owner])
    delivery = {d.channel: d for d in Delivery.objects.filter(notice__user=cast.owner)}
    assert set(delivery) == {"email", "webhook"}
    assert delivery["email"].target == "owner@example.com"
    assert delivery["webhook"].target == "http://127.0.0.1:9/hook"
    assert len(callbacks) == 2
    # Not chosen for the portal: recorded, but not in the portal's list.
    assert not selectors.notices_for(cast.owner).exists()
    assert selectors.unread_count(cast.owner) == 0


def test_without_an_email_host_no_email_is_made(cast: Cast) -> None:
    cast.owner.email = "owner@example.com"
    cast.owner.save()
    _notify(cast, users=[cast.owner])
    assert not Delivery.objects.exists()
    assert selectors.unread_count(cast.owner) == 1


def test_a_rolled_back_change_tells_nobody(
    cast: Cast, django_capture_on_commit_callbacks: Capture
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        try:
            with transaction.atomic():
                _notify(cast)
                raise RuntimeError("the caller's change failed")
        except RuntimeError:
            pass
    assert not Notice.objects.exists()
    assert callbacks == []


def test_preferences_are_validated_and_audited(cast: Cast) -> None:
    with pytest.raises(ValueError, match="'exploded'"):
        services.notification_preferences_set(
            actor=cast.owner,
            email_events=["exploded"],
            webhook_events=[],
            portal_events=[],
            webhook_url="",
        )
    with pytest.raises(core.WebhookUrlError, match="webhook URL"):
        services.notification_preferences_set(
            actor=cast.owner,
            email_events=[],
            webhook_events=["failed"],
            portal_events=[],
            webhook_url="",
        )
    with (
        override_settings(NOTIFY_WEBHOOK_ALLOW_LOOPBACK=False),
        pytest.raises(core.WebhookUrlError),
    ):
        services.notification_preferences_set(
            actor=cast.owner,
            email_events=[],
            webhook_events=["failed"],
            portal_events=[],
            webhook_url="https://169.254.169.254/latest",
        )
    services.notification_preferences_set(
        actor=cast.owner,
        email_events=[],
        webhook_events=[],
        portal_events=["failed"],
        webhook_url="",
    )
    prefs = selectors.preferences_of(cast.owner)
    assert prefs.events[core.Channel.PORTAL] == {NoticeEvent.FAILED}
    assert AuditEvent.objects.filter(
        actor_id=cast.owner.pk, action="notifications.preferences.update"
    ).exists()


def test_marking_read_touches_only_my_notices(cast: Cast) -> None:
    _notify(cast)
    theirs = Notice.objects.get(user=cast.teammate)
    mine = Notice.objects.get(user=cast.owner)
    assert services.notices_mark_read(user=cast.owner, ids=[theirs.pk, mine.pk]) == 1
    theirs.refresh_from_db()
    assert theirs.read_at is None
    assert selectors.unread_count(cast.owner) == 0
    assert selectors.unread_count(cast.teammate) == 1


def test_users_without_preferences_get_the_defaults(cast: Cast) -> None:
    prefs = selectors.preferences_of(cast.lead)
    assert prefs.events == core.DEFAULT_EVENTS
