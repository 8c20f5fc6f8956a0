from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may
from apps.adminsite.admin.formatting import gpus
from apps.common.http import client_ip
from apps.workloads import core
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.services import workload_cancel


class WorkloadEventInline(admin.TabularInline):
    model = WorkloadEvent
    extra = 0
    can_delete = False
    fields = ("created_at", "from_state", "to_state", "reason", "actor")
    readonly_fields = fields
    ordering = ("created_at", "id")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkloadEvent]:
        return super().get_queryset(request).select_related("actor")


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "kind",
        "state",
        "owner",
        "team",
        "gpu_class",
        "gpus_per_replica",
        "charged_per_replica",
        "replicas",
        "priority_class",
        "created_at",
    )
    list_display_links = ("id", "name")
    # Every filter is on an indexed column; related lookups are joined, never one query per row.
    list_filter = ("state", "kind", "priority_class", "gpu_class", "team")
    list_select_related = ("owner", "team", "gpu_class")
    search_fields = ("=id", "name", "owner__username")
    date_hierarchy = "created_at"
    show_full_result_count = False
    list_per_page = 100
    raw_id_fields = ("owner", "team", "gpu_class", "image", "cluster")
    readonly_fields = (
        "state",
        "created_at",
        "queued_at",
        "admitted_at",
        "started_at",
        "finished_at",
        "updated_at",
        "placement",
        "k8s_objects",
        "last_reason",
    )
    inlines = (WorkloadEventInline,)
    actions = ("cancel",)

    @admin.display(description="GPUs per replica", ordering="gpu_milli")
    def gpus_per_replica(self, obj: Workload) -> str:
        return gpus(obj.gpu_milli)

    @admin.display(description="charged per replica (GPUs)", ordering="charged_milli")
    def charged_per_replica(self, obj: Workload) -> str:
        return gpus(obj.charged_milli)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Workloads are requested through the portal or API, where quota rules apply.
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Shown, never edited: a workload changes through its lifecycle (the cancel action).
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Cancelled, never deleted: its Kubernetes objects and accounting depend on the row.
        return False

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        # Seeing workloads (an auditor) is not acting on them.
        return platform_may(request.user, Act.ACT_FOR_TEAMS)  # type: ignore[arg-type]

    @admin.action(description="Cancel selected workloads", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Workload]) -> None:
        done = skipped = 0
        for workload in queryset.exclude(state__in=core.TERMINAL_STATES):
            try:
                workload_cancel(
                    actor=request.user,  # type: ignore[arg-type]
                    workload=workload,
                    reason=f"Cancelled by admin {request.user.get_username()}.",
                    source_ip=client_ip(request),
                )
                done += 1
            except (ValidationError, PermissionDenied):
                skipped += 1
        msg = f"Cancelled {done} workload(s)."
        if skipped:
            msg += f" {skipped} changed state meanwhile and were left alone."
        self.message_user(request, msg, messages.SUCCESS)
