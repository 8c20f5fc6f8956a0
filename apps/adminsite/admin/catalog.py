from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may
from apps.adminsite.admin.base import ServiceAdmin, actor, source_ip
from apps.adminsite.admin.formatting import cost, gib
from apps.adminsite.admin.quotas import QuotaInline
from apps.catalog.models import Cluster, ClusterNode, GpuClass, Image, NodeMaintenance
from apps.catalog.selectors import node_blockers
from apps.catalog.services import (
    cluster_delete,
    cluster_save,
    gpu_class_delete,
    gpu_class_save,
    gpu_class_set_enabled,
    image_delete,
    image_save,
    node_maintenance_delete,
    node_maintenance_save,
)
from apps.quotas.selectors import guarantee_warning_for_class


@admin.register(GpuClass)
class GpuClassAdmin(ServiceAdmin):
    list_display = (
        "name",
        "product_label",
        "memory",
        "sharing_mode",
        "allocation_mode",
        "cost_per_hour",
        "capacity_gpus",
        "enabled",
    )
    list_filter = ("sharing_mode", "allocation_mode", "enabled")
    search_fields = ("name", "product_label")
    inlines = (QuotaInline,)
    actions = ("enable", "disable")

    @admin.display(description="memory per GPU", ordering="memory_mib")
    def memory(self, obj: GpuClass) -> str:
        return gib(obj.memory_mib)

    @admin.display(description="hourly cost per GPU", ordering="hourly_cost")
    def cost_per_hour(self, obj: GpuClass) -> str:
        return cost(obj.hourly_cost)

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
        ("Allocation", {"fields": ("allocation_mode",)}),
    )

    def save_model(
        self, request: HttpRequest, obj: GpuClass, form: forms.ModelForm, change: bool
    ) -> None:
        gpu_class_save(actor=actor(request), gpu_class=obj, source_ip=source_ip(request))

    def delete_model(self, request: HttpRequest, obj: GpuClass) -> None:
        gpu_class_delete(actor=actor(request), gpu_class=obj, source_ip=source_ip(request))

    def related_warnings(self, request: HttpRequest, form: Any) -> list[str]:
        warning = guarantee_warning_for_class(form.instance)
        return [warning] if warning else []

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """Billing changes a class's price, the capacity side the rest (the service says so
        again)."""
        user = request.user
        if obj is None or platform_may(user, Act.MANAGE_CAPACITY):  # type: ignore[arg-type]
            return super().get_readonly_fields(request, obj)
        priced = platform_may(user, Act.MANAGE_BILLING)  # type: ignore[arg-type]
        fields = [f for _, options in self.fieldsets for f in options["fields"]]
        return [f for f in fields if not (priced and f == "hourly_cost")]

    def has_offer_permission(self, request: HttpRequest) -> bool:
        return platform_may(request.user, Act.MANAGE_CAPACITY)  # type: ignore[arg-type]

    @admin.action(description="Offer the selected classes to users", permissions=["offer"])
    def enable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(
        description="Stop offering the selected classes (running work is kept)",
        permissions=["offer"],
    )
    def disable(self, request: HttpRequest, queryset: Any) -> None:
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request: HttpRequest, queryset: Any, value: bool) -> None:
        for gpu_class in queryset:
            gpu_class_set_enabled(
                actor=actor(request),
                gpu_class=gpu_class,
                enabled=value,
                source_ip=source_ip(request),
            )
        self.message_user(request, "Done.", messages.SUCCESS)


@admin.register(Image)
class ImageAdmin(ServiceAdmin):
    list_display = ("name", "reference", "kind", "read_only_root", "enabled", "created_at")
    list_filter = ("kind", "enabled", "read_only_root")
    search_fields = ("name", "reference")

    def save_model(
        self, request: HttpRequest, obj: Image, form: forms.ModelForm, change: bool
    ) -> None:
        image_save(actor=actor(request), image=obj, source_ip=source_ip(request))

    def delete_model(self, request: HttpRequest, obj: Image) -> None:
        image_delete(actor=actor(request), image=obj, source_ip=source_ip(request))


@admin.register(Cluster)
class ClusterAdmin(ServiceAdmin):
    list_display = ("name", "role", "connection", "kubeconfig_path", "enabled")
    list_filter = ("role", "connection", "enabled")
    search_fields = ("name",)

    def save_model(
        self, request: HttpRequest, obj: Cluster, form: forms.ModelForm, change: bool
    ) -> None:
        # A new, re-enabled or reconnected cluster gets every team's namespace, then its nodes.
        cluster_save(actor=actor(request), cluster=obj, source_ip=source_ip(request))

    def delete_model(self, request: HttpRequest, obj: Cluster) -> None:
        cluster_delete(actor=actor(request), cluster=obj, source_ip=source_ip(request))


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
        "health_verdict",
        "takes_work",
        "last_seen_at",
    )
    list_filter = ("cluster", "gpu_class", "ready", "schedulable", "health_verdict")
    search_fields = ("name",)
    list_select_related = ("cluster", "gpu_class")
    readonly_fields = ("takes_work",)

    def get_queryset(self, request: HttpRequest) -> Any:
        self._blocked: dict[int, list[str]] | None = None
        return super().get_queryset(request)

    @admin.display(description="takes new work")
    def takes_work(self, obj: ClusterNode) -> str:
        """Yes, or why not: cordoned, NotReady, health check failed, maintenance; and which of
        its GPUs failed their own check (they take none while the rest of the node does)."""
        blocked = getattr(self, "_blocked", None)
        if blocked is None:
            # One read for the whole page: the nodes listed are few hundred at most.
            nodes = ClusterNode.objects.all()
            blocked = self._blocked = node_blockers(nodes, now=timezone.now())
        reasons = blocked.get(obj.pk)
        if reasons:
            return "no: " + " ".join(reasons)
        faulty = [
            f"GPU {f.get('index')} ({f.get('effect')}: {f.get('reason')})"
            for f in obj.gpu_faults or ()
            if isinstance(f, dict)
        ]
        return "yes, except " + "; ".join(faulty) if faulty else "yes"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(NodeMaintenance)
class NodeMaintenanceAdmin(ServiceAdmin):
    """Maintenance windows: the node takes no new work from the start; with drain, what runs
    there gets its class's notice and goes back to the queue."""

    list_display = ("node", "starts_at", "ends_at", "drain", "reason", "created_by")
    list_filter = ("drain", "node__cluster")
    search_fields = ("node__name", "reason")
    list_select_related = ("node", "node__cluster", "created_by")
    fields = ("node", "starts_at", "ends_at", "drain", "reason")
    autocomplete_fields = ("node",)

    def save_model(
        self, request: HttpRequest, obj: NodeMaintenance, form: forms.ModelForm, change: bool
    ) -> None:
        node_maintenance_save(actor=actor(request), window=obj, source_ip=source_ip(request))

    def delete_model(self, request: HttpRequest, obj: NodeMaintenance) -> None:
        node_maintenance_delete(actor=actor(request), window=obj, source_ip=source_ip(request))
