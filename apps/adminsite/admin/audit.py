from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from apps.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the trail is written by services, never edited by hand."""

    list_display = ("created_at", "actor_repr", "action", "object_type", "object_repr", "source_ip")
    list_filter = ("action", "object_type", ("created_at", admin.DateFieldListFilter))
    search_fields = ("actor_repr", "action", "object_repr", "object_id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    readonly_fields = [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
