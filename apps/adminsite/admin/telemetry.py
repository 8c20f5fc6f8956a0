from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from apps.adminsite.admin.base import ServiceAdmin, actor, source_ip
from apps.adminsite.admin.formatting import cost, gib, gpu_hours, percent
from apps.telemetry import selectors
from apps.telemetry.models import (
    IdleNotice,
    IdlePolicy,
    IngestCursor,
    NodeHealthReport,
    UsageDay,
    WorkloadUsage,
)
from apps.telemetry.services import idle_policy_delete, idle_policy_save


@admin.register(IdlePolicy)
class IdlePolicyAdmin(ServiceAdmin):
    list_display = (
        "__str__",
        "enabled",
        "threshold_percent",
        "warn_after",
        "suspend_after",
        "flag_after",
    )
    list_filter = ("enabled", "gpu_class", "team")

    def save_model(
        self, request: HttpRequest, obj: IdlePolicy, form: forms.ModelForm, change: bool
    ) -> None:
        idle_policy_save(actor=actor(request), policy=obj, source_ip=source_ip(request))

    def delete_model(self, request: HttpRequest, obj: IdlePolicy) -> None:
        idle_policy_delete(actor=actor(request), policy=obj, source_ip=source_ip(request))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Measurements and their bookkeeping: written by the telemetry passes, only shown here."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(NodeHealthReport)
class NodeHealthReportAdmin(ReadOnlyAdmin):
    """The acceptance check of a GPU node: count, model, memory, driver, ECC, XID, temperature."""

    list_display = (
        "hostname",
        "verdict",
        "gpu_count",
        "expected_gpu_count",
        "models_seen",
        "memory",
        "driver_version",
        "ecc_single_bit",
        "ecc_double_bit",
        "max_temperature_c",
        "source",
        "reported_at",
    )
    list_filter = ("verdict", "source")
    search_fields = ("hostname", "models_seen", "driver_version")
    readonly_fields = ("problem_list", "gpu_table")
    exclude = ("problems", "gpus")

    @admin.display(description="memory per GPU", ordering="memory_mib")
    def memory(self, obj: NodeHealthReport) -> str:
        return gib(obj.memory_mib)

    @admin.display(description="problems")
    def problem_list(self, obj: NodeHealthReport) -> str:
        return format_html_join("", "<div>{}</div>", ((p,) for p in obj.problems)) or "none"

    @admin.display(description="GPUs")
    def gpu_table(self, obj: NodeHealthReport) -> str:
        return format_html_join(
            "",
            "<div>GPU {} · {} · {} · {} · {} °C · ECC {}/{} · XID {}</div>",
            (
                (
                    g.get("index"),
                    g.get("uuid"),
                    g.get("model"),
                    gib(g.get("memory_mib")),
                    g.get("temperature_c"),
                    g.get("ecc_sbe"),
                    g.get("ecc_dbe"),
                    g.get("xid"),
                )
                for g in obj.gpus
            ),
        )


@admin.register(IdleNotice)
class IdleNoticeAdmin(ReadOnlyAdmin):
    list_display = ("workload", "kind", "created_at", "resolved_at", "reclaimed_hours")
    list_filter = ("kind",)
    date_hierarchy = "created_at"
    search_fields = ("workload__name", "message")

    @admin.display(description="GPU-hours reclaimed")
    def reclaimed_hours(self, obj: IdleNotice) -> str:
        return gpu_hours(obj.reclaimed_gpu_seconds()) if obj.kind == "suspended" else ""

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):  # type: ignore[no-untyped-def]
        summary = selectors.reclaimed()
        context = {
            **(extra_context or {}),
            "title": (
                f"Idle notices — {summary.gpu_hours:.1f} GPU-hours reclaimed by "
                f"{summary.suspensions} suspensions"
            ),
        }
        return super().changelist_view(request, extra_context=context)


@admin.register(WorkloadUsage)
class WorkloadUsageAdmin(ReadOnlyAdmin):
    list_display = (
        "workload",
        "allocated",
        "used",
        "utilisation",
        "idle_since",
        "last_sample_at",
    )
    search_fields = ("workload__name",)

    @admin.display(description="allocated GPU-hours", ordering="allocated_gpu_seconds")
    def allocated(self, obj: WorkloadUsage) -> str:
        return gpu_hours(obj.allocated_gpu_seconds)

    @admin.display(description="used GPU-hours", ordering="used_gpu_seconds")
    def used(self, obj: WorkloadUsage) -> str:
        return gpu_hours(obj.used_gpu_seconds)

    @admin.display(description="last utilisation", ordering="last_utilisation")
    def utilisation(self, obj: WorkloadUsage) -> str:
        return percent(obj.last_utilisation)

    def get_queryset(self, request: HttpRequest) -> QuerySet[WorkloadUsage]:
        return super().get_queryset(request).select_related("workload")


@admin.register(UsageDay)
class UsageDayAdmin(ReadOnlyAdmin):
    list_display = (
        "day",
        "workload",
        "team",
        "owner",
        "gpu_class",
        "allocated",
        "used",
        "charged",
    )
    list_filter = ("gpu_class", "team")
    date_hierarchy = "day"

    @admin.display(description="allocated GPU-hours", ordering="allocated_gpu_seconds")
    def allocated(self, obj: UsageDay) -> str:
        return gpu_hours(obj.allocated_gpu_seconds)

    @admin.display(description="used GPU-hours", ordering="used_gpu_seconds")
    def used(self, obj: UsageDay) -> str:
        return gpu_hours(obj.used_gpu_seconds)

    @admin.display(description="cost", ordering="cost")
    def charged(self, obj: UsageDay) -> str:
        return cost(obj.cost)


@admin.register(IngestCursor)
class IngestCursorAdmin(ReadOnlyAdmin):
    list_display = ("until", "last_duration_ms", "last_series", "last_workloads", "last_error")
