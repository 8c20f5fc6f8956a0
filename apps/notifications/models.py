from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.notifications import core


class Notice(models.Model):
    """One thing a user was told. At most one per (user, key): telling twice is a no-op."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices"
    )
    team = models.ForeignKey(
        "accounts.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    event = models.CharField(
        max_length=40, choices=[(e.value, core.EVENT_LABELS[e]) for e in core.NoticeEvent]
    )
    title = models.CharField(max_length=core.TITLE_MAX_LENGTH)
    body = models.TextField(max_length=core.BODY_MAX_LENGTH, blank=True)
    link = models.CharField(max_length=core.LINK_MAX_LENGTH, blank=True)
    key = models.CharField(max_length=core.KEY_MAX_LENGTH)
    # Whether the portal's notice list shows it (the user's preference when it was made).
    in_portal = models.BooleanField(default=True)
    created = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="notice_once_per_user_key"),
        ]
        indexes = [
            models.Index(
                fields=["user", "-created"],
                condition=models.Q(in_portal=True),
                name="notice_portal_list",
            ),
            models.Index(
                fields=["user"],
                condition=models.Q(in_portal=True, read_at__isnull=True),
                name="notice_unread",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} → {self.user}"


class NotificationPreference(models.Model):
    """A user's choices per channel: the events it carries (a list of event names)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    email_events = models.JSONField(default=list, blank=True)
    webhook_events = models.JSONField(default=list, blank=True)
    portal_events = models.JSONField(default=list, blank=True)
    digest_events = models.JSONField(default=list, blank=True)
    webhook_url = models.CharField(max_length=core.WEBHOOK_URL_MAX_LENGTH, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"notification preferences of {self.user}"


class Delivery(models.Model):
    """One notice on its way out by one channel. The status moves pending → sending → sent
    (or failed); only the worker that moved it to ``sending`` sends it, so a notice goes out
    at most once per channel whatever the retries or the number of workers."""

    notice = models.ForeignKey(Notice, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(
        max_length=10,
        choices=[(c.value, core.CHANNEL_LABELS[c]) for c in core.DELIVERED_CHANNELS],
    )
    # Where it goes, fixed when the notice was made (the address or URL then chosen).
    target = models.CharField(max_length=core.WEBHOOK_URL_MAX_LENGTH)
    status = models.CharField(max_length=10, default=core.DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    created = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["notice", "channel"], name="delivery_once_per_channel"),
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in core.DeliveryStatus]),
                name="delivery_status_known",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="pending"),
                name="delivery_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} of notice {self.notice_id}: {self.status}"


class DigestSent(models.Model):
    """A user's daily digest of one day, sent: at most one per (user, day), whatever the
    retries or the number of workers."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    notices = models.PositiveIntegerField(default=0)
    sent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "day"], name="digest_once_per_user_day"),
        ]

    def __str__(self) -> str:
        return f"digest of {self.day} for {self.user}"
