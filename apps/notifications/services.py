"""Writes: make notices, deliver them, record what users chose and read.

Other apps call :func:`notify`; it is safe inside their transactions, since delivery is only
queued when the transaction commits (and a rolled-back change tells nobody).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.audit.services import audit_record
from apps.common import taskqueue
from apps.notifications import core, selectors, transport
from apps.notifications.models import Delivery, DigestSent, Notice, NotificationPreference

log = logging.getLogger(__name__)

_CLAIMED_TOO_LONG = timedelta(minutes=15)


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclass(frozen=True)
class Notification:
    """One notice for one user, as :func:`notify_many` takes them."""

    event: str
    user: User
    title: str
    body: str
    key: str
    link: str = ""
    team: Team | None = None


def notify_many(notifications: Sequence[Notification]) -> int:
    """:func:`notify` for each (one user each), in a few statements for all of them: who was
    told already, the preferences, the notices and their deliveries. Returns how many notices
    were new. If another caller tells one of them meanwhile, they are told one by one instead,
    as :func:`notify` does (a (user, key) told before is skipped)."""
    todo: dict[tuple[int, str], Notification] = {}
    for n in notifications:
        core.NoticeEvent(n.event)
        if not n.key or len(n.key) > core.KEY_MAX_LENGTH:
            raise ValueError(f"A notice key has 1 to {core.KEY_MAX_LENGTH} characters.")
        if n.user.pk is not None and n.user.is_active:
            todo.setdefault((n.user.pk, n.key), n)
    if not todo:
        return 0
    told = set(
        Notice.objects.filter(
            user_id__in={pk for pk, _ in todo}, key__in={key for _, key in todo}
        ).values_list("user_id", "key")
    )
    todo = {k: n for k, n in todo.items() if k not in told}
    prefs = selectors.preferences_of_many({n.user.pk: n.user for n in todo.values()}.values())
    notices: list[Notice] = []
    targets: list[list[tuple[core.Channel, str]]] = []
    for (pk, _), n in todo.items():
        channels = _channels(prefs[pk], core.NoticeEvent(n.event))
        notices.append(_notice(n, in_portal=core.Channel.PORTAL in channels))
        targets.append(_targets(prefs[pk], channels))
    try:
        with transaction.atomic():
            Notice.objects.bulk_create(notices)
            deliveries = [
                Delivery(notice=notice, channel=channel.value, target=target)
                for notice, chosen in zip(notices, targets, strict=True)
                for channel, target in chosen
            ]
            Delivery.objects.bulk_create(deliveries)
    except IntegrityError:  # told meanwhile by another caller: one by one, as notify does
        return sum(
            notify(
                event=n.event,
                users=[n.user],
                title=n.title,
                body=n.body,
                key=n.key,
                link=n.link,
                team=n.team,
            )
            for n in todo.values()
        )
    for delivery in deliveries:
        taskqueue.NOTICE_DELIVER.on_commit(delivery.pk)
    return len(notices)


def _channels(pref: core.Preferences, kind: core.NoticeEvent) -> set[core.Channel]:
    channels = set(core.channels_for(pref, kind))
    if not settings.NOTIFY_EMAIL_ENABLED:
        channels -= {core.Channel.EMAIL}
    return channels


def _targets(pref: core.Preferences, channels: set[core.Channel]) -> list[tuple[core.Channel, str]]:
    """The deliveries a notice gets besides the portal: (channel, address) for each chosen."""
    return [
        (channel, target)
        for channel, target in (
            (core.Channel.EMAIL, pref.email_address),
            (core.Channel.WEBHOOK, pref.webhook_url),
        )
        if channel in channels
    ]


def _notice(n: Notification, *, in_portal: bool) -> Notice:
    return Notice(
        user_id=n.user.pk,
        team=n.team,
        event=core.NoticeEvent(n.event).value,
        title=_clip(n.title, core.TITLE_MAX_LENGTH),
        body=_clip(n.body, core.BODY_MAX_LENGTH),
        link=_clip(n.link, core.LINK_MAX_LENGTH),
        key=n.key,
        in_portal=in_portal,
    )


def notify(
    *,
    event: str,
    users: Iterable[User],
    title: str,
    body: str,
    key: str,
    link: str = "",
    team: Team | None = None,
) -> int:
    """Tell each user once about ``key``: a notice (shown in the portal if they chose so) and a
    delivery per other chosen channel, queued on commit. Returns how many notices were new;
    a (user, key) told before is skipped, even when two callers race."""
    kind = core.NoticeEvent(event)
    if not key or len(key) > core.KEY_MAX_LENGTH:
        raise ValueError(f"A notice key has 1 to {core.KEY_MAX_LENGTH} characters.")
    people = {u.pk: u for u in users if u.pk is not None and u.is_active}
    if not people:
        return 0
    told = set(Notice.objects.filter(user_id__in=people, key=key).values_list("user_id", flat=True))
    prefs = selectors.preferences_of_many(u for pk, u in people.items() if pk not in told)
    created = 0
    for pk, pref in prefs.items():
        channels = _channels(pref, kind)
        spec = Notification(kind.value, people[pk], title, body, key, link, team)
        try:
            # A savepoint each: the unique (user, key) turns a racing second caller into a
            # no-op for that user without undoing the others or the caller's transaction.
            with transaction.atomic():
                notice = _notice(spec, in_portal=core.Channel.PORTAL in channels)
                notice.save(force_insert=True)
                deliveries = [
                    Delivery(notice=notice, channel=channel.value, target=target)
                    for channel, target in _targets(pref, channels)
                ]
                Delivery.objects.bulk_create(deliveries)
        except IntegrityError:
            continue
        created += 1
        for delivery in deliveries:
            taskqueue.NOTICE_DELIVER.on_commit(delivery.pk)
    return created


# --- delivery -----------------------------------------------------------------------------------


class RetryLater(Exception):
    """The attempt failed for now; try again after ``countdown`` seconds."""

    def __init__(self, countdown: int, reason: str) -> None:
        super().__init__(reason)
        self.countdown = countdown


def _absolute(link: str) -> str:
    if link.startswith("/") and settings.PORTAL_URL:
        return f"{settings.PORTAL_URL}{link}"
    return link


def delivery_attempt(*, delivery_id: int) -> str:
    """Send one delivery if it is due and nobody else holds it. Returns its status after the
    attempt, or "skipped"; raises :class:`RetryLater` when a later attempt may succeed."""
    now = timezone.now()
    # The claim is one conditional update: of two workers (or a retry racing the periodic
    # pass) only the one that moved the row from pending to sending sends it.
    claimed = Delivery.objects.filter(
        pk=delivery_id, status=core.DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(status=core.DeliveryStatus.SENDING, attempts=F("attempts") + 1, claimed_at=now)
    if not claimed:
        return "skipped"
    delivery = Delivery.objects.select_related("notice").get(pk=delivery_id)
    notice = delivery.notice
    event = core.NoticeEvent(notice.event)
    link = _absolute(notice.link)
    try:
        if delivery.channel == core.Channel.EMAIL:
            message = core.email_message(
                event=event,
                title=notice.title,
                body=notice.body,
                link=link,
                site_name=settings.NOTIFY_SITE_NAME,
                prefs_url=_absolute("/notifications/preferences/"),
            )
            transport.send_email(to=delivery.target, message=message)
        else:
            payload = core.webhook_payload(
                event=event, title=notice.title, body=notice.body, link=link
            )
            transport.post_webhook(url=delivery.target, payload=payload)
    except transport.PermanentError as exc:
        _finish(delivery, core.DeliveryStatus.FAILED, str(exc))
        return core.DeliveryStatus.FAILED
    except transport.TransientError as exc:
        if delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
            _finish(delivery, core.DeliveryStatus.FAILED, f"gave up: {exc}")
            return core.DeliveryStatus.FAILED
        delay = core.retry_delay_seconds(delivery.attempts, base=settings.NOTIFY_RETRY_BASE_SECONDS)
        Delivery.objects.filter(pk=delivery.pk, status=core.DeliveryStatus.SENDING).update(
            status=core.DeliveryStatus.PENDING,
            last_error=_clip(str(exc), 500),
            next_attempt_at=timezone.now() + timedelta(seconds=delay),
        )
        raise RetryLater(delay, str(exc)) from exc
    _finish(delivery, core.DeliveryStatus.SENT, "")
    return core.DeliveryStatus.SENT


def _finish(delivery: Delivery, status: core.DeliveryStatus, error: str) -> None:
    Delivery.objects.filter(pk=delivery.pk, status=core.DeliveryStatus.SENDING).update(
        status=status,
        last_error=_clip(error, 500),
        sent_at=timezone.now() if status == core.DeliveryStatus.SENT else None,
    )
    if status == core.DeliveryStatus.FAILED:
        log.warning(
            "notice %s by %s not delivered: %s", delivery.notice_id, delivery.channel, error
        )


def deliveries_sweep() -> int:
    """The periodic pass: queue deliveries whose attempt is overdue (their queued task was
    lost), and give up on claims left by a worker that died mid-send. Those are not sent
    again: the message may have left, and a notice is never sent twice."""
    now = timezone.now()
    Delivery.objects.filter(
        status=core.DeliveryStatus.SENDING, claimed_at__lt=now - _CLAIMED_TOO_LONG
    ).update(
        status=core.DeliveryStatus.FAILED,
        last_error="interrupted while sending; not sent again so that it is never sent twice",
    )
    due = list(
        selectors.deliveries_due(before=now - timedelta(seconds=60)).values_list("pk", flat=True)[
            :500
        ]
    )
    for pk in due:
        taskqueue.NOTICE_DELIVER.send(pk)
    return len(due)


# --- what users choose and read -----------------------------------------------------------------


def notification_preferences_set(
    *,
    actor: User,
    email_events: Sequence[str],
    webhook_events: Sequence[str],
    portal_events: Sequence[str],
    webhook_url: str,
    digest_events: Sequence[str] | None = None,
    source_ip: str | None = None,
) -> NotificationPreference:
    """Record the actor's own choices. Unknown events raise ``ValueError``; a webhook URL the
    platform will not call raises :class:`core.WebhookUrlError` (both with a readable message)."""
    events = {
        "email_events": sorted(core.parse_events(email_events)),
        "webhook_events": sorted(core.parse_events(webhook_events)),
        "portal_events": sorted(core.parse_events(portal_events)),
    }
    if digest_events is not None:  # None: as chosen before (a client that does not know it)
        events["digest_events"] = sorted(core.parse_events(digest_events))
    url = (
        core.webhook_url_check(webhook_url, allow_loopback=settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK)
        if webhook_url.strip()
        else ""
    )
    if events["webhook_events"] and not url:
        raise core.WebhookUrlError("Give a webhook URL, or choose no events for the webhook.")
    with transaction.atomic():
        row, created = NotificationPreference.objects.select_for_update().get_or_create(user=actor)
        if created and digest_events is None:  # a first choice keeps the digest's default
            row.digest_events = sorted(core.DEFAULT_EVENTS[core.Channel.DIGEST])
        before = {k: getattr(row, k) for k in (*events, "webhook_url")}
        for name, value in events.items():
            setattr(row, name, [str(v) for v in value])
        row.webhook_url = url
        row.updated_at = timezone.now()
        row.save()
        after = {k: getattr(row, k) for k in (*events, "webhook_url")}
        if before != after:
            audit_record(
                actor=actor,
                action="notifications.preferences.update",
                obj=row,
                source_ip=source_ip,
                details={
                    "changed": {
                        k: {"from": before[k], "to": after[k]}
                        for k in after
                        if before[k] != after[k]
                    }
                },
            )
    return row


def notices_mark_read(*, user: User, ids: Iterable[int] | None = None) -> int:
    """Mark the user's notices read (all unread ones when ``ids`` is None); returns how many.
    Ids of other users' notices are ignored."""
    rows = Notice.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    return rows.update(read_at=timezone.now())


# --- the daily digest ---------------------------------------------------------------------------

DIGEST_WINDOW = timedelta(days=1)


def notice_digests_send(*, now: datetime | None = None) -> int:
    """Send each user who chose the digest one e-mail with the day's notices of the events
    they chose for it (by default admitted, running and finished), grouped per workload.
    Covers the day before ``now`` (UTC); a user is sent at most one digest per day, so a retry
    or a second worker sends nothing twice. Returns how many digests were sent."""
    moment = now or timezone.now()
    day = (moment - DIGEST_WINDOW).date()
    if not settings.NOTIFY_EMAIL_ENABLED:
        return 0
    start = datetime.combine(day, time.min, tzinfo=UTC)
    window = Notice.objects.filter(created__gte=start, created__lt=start + DIGEST_WINDOW)
    users = User.objects.filter(pk__in=window.values("user_id"), is_active=True).exclude(
        pk__in=DigestSent.objects.filter(day=day).values("user_id")
    )
    prefs = selectors.preferences_of_many(users)
    sent = 0
    for user in users:
        pref = prefs[user.pk]
        chosen = pref.events.get(core.Channel.DIGEST, frozenset())
        if not chosen or not pref.email_address:
            continue
        items = [
            core.DigestItem(core.NoticeEvent(n.event), n.title, n.link, n.created)
            for n in window.filter(user=user, event__in=[e.value for e in chosen])
        ]
        if not items:
            continue
        try:
            with transaction.atomic():
                DigestSent.objects.create(user=user, day=day, notices=len(items))
        except IntegrityError:  # sent meanwhile by another worker
            continue
        message = core.digest_message(
            groups=core.digest_groups(items),
            day=day.isoformat(),
            site_name=settings.NOTIFY_SITE_NAME,
            prefs_url=_absolute("/notifications/preferences/"),
            absolute=_absolute,
        )
        try:
            transport.send_email(to=pref.email_address, message=message)
        except (transport.TransientError, transport.PermanentError) as exc:
            log.warning("daily digest for %s not sent: %s", user.pk, exc)
            DigestSent.objects.filter(user=user, day=day).delete()  # the next pass tries again
            continue
        sent += 1
    return sent
