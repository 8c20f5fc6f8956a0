"""Reads: a user's preferences and notices."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from apps.accounts.models import User
from apps.notifications import core
from apps.notifications.models import Delivery, Notice, NotificationPreference


def _prefs_from_row(row: NotificationPreference | None, *, email: str) -> core.Preferences:
    if row is None:
        return core.default_preferences(email_address=email)
    return core.Preferences(
        events={
            core.Channel.EMAIL: _known(row.email_events),
            core.Channel.WEBHOOK: _known(row.webhook_events),
            core.Channel.PORTAL: _known(row.portal_events),
            core.Channel.DIGEST: _known(row.digest_events),
        },
        email_address=email,
        webhook_url=row.webhook_url,
    )


_EVENT_NAMES = frozenset(e.value for e in core.NoticeEvent)


def _known(values: object) -> frozenset[core.NoticeEvent]:
    names = values if isinstance(values, list) else []
    return frozenset(core.NoticeEvent(v) for v in names if v in _EVENT_NAMES)


def preferences_of(user: User) -> core.Preferences:
    row = NotificationPreference.objects.filter(user=user).first()
    return _prefs_from_row(row, email=user.email)


def preferences_of_many(users: Iterable[User]) -> dict[int, core.Preferences]:
    people = list(users)
    rows = {
        row.user_id: row
        for row in NotificationPreference.objects.filter(user_id__in=[u.pk for u in people])
    }
    return {u.pk: _prefs_from_row(rows.get(u.pk), email=u.email) for u in people}


def notices_for(user: User) -> QuerySet[Notice]:
    """The user's notices in the portal's list, newest first."""
    return Notice.objects.filter(user=user, in_portal=True).order_by("-created", "-id")


def unread_count(user: User) -> int:
    return Notice.objects.filter(user=user, in_portal=True, read_at__isnull=True).count()


def deliveries_due(*, before: object) -> QuerySet[Delivery]:
    return Delivery.objects.filter(
        status=core.DeliveryStatus.PENDING, next_attempt_at__lte=before
    ).order_by("next_attempt_at")
