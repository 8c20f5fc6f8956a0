from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from apps.audit.services import audit_record
from apps.catalog.models import Cluster, ClusterNode, GpuClass, Image
from apps.common import taskqueue
from apps.common.http import client_ip
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import guarantee_warning_for_class


class AuditedAdmin(admin.ModelAdmin):
    """Records every admin change and deletion in the audit trail."""

    def save_model(
        self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        audit_record(
            actor=request.user,  # type: ignore[arg-type]
            action=f"{obj._meta.model_name}.{'update' if change else 'create'}",
            obj=obj,
            source_ip=client_ip(request),
            details={"changed": form.changed_data},
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        audit_record(
            actor=request.user,  # type: ignore[arg-type]
            action=f"{obj._meta.model_name}.delete",
            obj=obj,
            source_ip=client_ip(request),
        )
        super().delete_model(request, obj)


class QuotaInline(admin.TabularInline):
    model = TeamQuota
    extra = 0
    fields = ("team", "guaranteed_milli", "limit_milli", "per_user_cap_milli")
    autocomplete_fields = ("team",)


@admin.register(GpuClass)
class GpuClassAdmin(AuditedAdmin):
    list_display = (
        "name",
        "product_label",
        "memory_mib",
        "sharing_mode",
        "hourly_cost",
        "capacity_gpus",
        "enabled",
    )
    list_filter = ("sharing_mode", "enabled")
    search_fields = ("name", "product_label")
    inlines = (QuotaInline,)
    actions = ("enable", "disable")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "product_label",
                    "memory_mib",
                    "hourly_cost",
                    "capacity_gpus",
                    "enabled",
                    "description",
                )
            },
        ),
        (
            "Sharing",
            {"fields": ("sharing_mode", "timeslice_replicas", "mig_profiles", "hami_split_count")},
        ),
    )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        warning = guarantee_warning_for_class(form.instance)
        if warning:
            messages.warning(request, warning)

    @admin.action(description="Offer the selected classes to users")
    def enable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Stop offering the selected classes (running work is kept)")
    def disable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: Any, value: bool) -> None:
        for gpu_class in queryset:
            if gpu_class.enabled != value:
                gpu_class.enabled = value
                gpu_class.save(update_fields=["enabled"])
                audit_record(
                    actor=request.user,  # type: ignore[arg-type]
                    action="gpuclass.enable" if value else "gpuclass.disable",
                    obj=gpu_class,
                    source_ip=client_ip(request),
                )
        self.message_user(request, "Done.", messages.SUCCESS)


@admin.register(Image)
class ImageAdmin(AuditedAdmin):
    list_display = ("name", "reference", "kind", "read_only_root", "enabled", "created_at")
    list_filter = ("kind", "enabled", "read_only_root")
    search_fields = ("name", "reference")


@admin.register(Cluster)
class ClusterAdmin(AuditedAdmin):
    list_display = ("name", "role", "connection", "kubeconfig_path", "enabled")
    list_filter = ("role", "connection", "enabled")
    search_fields = ("name",)

    def save_model(
        self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        if obj.enabled:
            # Every team's namespace on the (new or re-enabled) cluster, then its node inventory.
            taskqueue.CLUSTER_SETUP.on_commit(obj.pk)


@admin.register(ClusterNode)
class ClusterNodeAdmin(admin.ModelAdmin):
    """Read-only inventory: written by the cluster sync, shown for acceptance and debugging."""

    list_display = (
        "name",
        "cluster",
        "gpu_class",
        "gpu_count",
        "ready",
        "schedulable",
        "last_seen_at",
    )
    list_filter = ("cluster", "gpu_class", "ready", "schedulable")
    search_fields = ("name",)
    list_select_related = ("cluster", "gpu_class")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
