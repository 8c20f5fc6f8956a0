"""Notices and their deliveries: written by the notification service, only shown here."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.notifications.models import Delivery, Notice


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Notice)
class NoticeAdmin(_ReadOnly):
    list_display = ("created", "user", "event", "title", "team", "read_at")
    list_filter = ("event",)
    search_fields = ("title", "key", "user__username")
    list_select_related = ("user", "team")
    date_hierarchy = "created"


@admin.register(Delivery)
class DeliveryAdmin(_ReadOnly):
    """Where a notice went: failed ones say why (last error) after their last attempt."""

    list_display = ("created", "notice", "channel", "status", "attempts", "last_error", "sent_at")
    list_filter = ("status", "channel")
    search_fields = ("target", "notice__title", "notice__user__username")
    list_select_related = ("notice", "notice__user")
