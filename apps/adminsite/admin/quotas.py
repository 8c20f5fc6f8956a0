from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from apps.adminsite.admin.base import (
    KeyLockedForm,
    SafeAutocompleteMixin,
    ServiceAdmin,
    ServiceFormSet,
    actor,
    source_ip,
)
from apps.adminsite.admin.formatting import gpus
from apps.catalog.models import GpuClass
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import guarantee_warning_for_class
from apps.quotas.services import team_quota_delete, team_quota_set


class QuotaFormSet(ServiceFormSet):
    """Quota rows of a team or of a GPU class, each written by ``team_quota_set`` or
    ``team_quota_delete`` (audit event, and the team's ResourceQuota refreshed on commit)."""

    def save_through_services(self, request: HttpRequest) -> list[str]:
        saved, deleted = self.pending()
        touched: dict[int, GpuClass] = {}
        for quota in deleted:
            assert isinstance(quota, TeamQuota)
            touched[quota.gpu_class_id] = quota.gpu_class
            team_quota_delete(actor=actor(request), quota=quota, source_ip=source_ip(request))
        for quota in saved:
            assert isinstance(quota, TeamQuota)
            try:
                result = team_quota_set(
                    actor=actor(request),
                    team=quota.team,
                    gpu_class=quota.gpu_class,
                    guaranteed_milli=quota.guaranteed_milli,
                    limit_milli=quota.limit_milli,
                    per_user_cap_milli=quota.per_user_cap_milli,
                    source_ip=source_ip(request),
                )
            except ValidationError as exc:  # already checked by the form; a race can land here
                messages.error(
                    request, f"{quota.team} × {quota.gpu_class}: {'; '.join(exc.messages)}"
                )
                continue
            quota.pk = result.quota.pk
            touched[quota.gpu_class_id] = quota.gpu_class
        # Once every row is written, so the sums are the final ones.
        return [w for c in touched.values() if (w := guarantee_warning_for_class(c))]


class TeamQuotaRowForm(KeyLockedForm):
    locked = ("team", "gpu_class")


class QuotaInline(SafeAutocompleteMixin, admin.TabularInline):
    """A GPU class's quotas, one row per team."""

    model = TeamQuota
    form = TeamQuotaRowForm
    formset = QuotaFormSet
    extra = 0
    fields = ("team", "guaranteed_milli", "limit_milli", "per_user_cap_milli")
    autocomplete_fields = ("team",)


class TeamQuotaInline(admin.TabularInline):
    """A team's quotas, one row per GPU class."""

    model = TeamQuota
    form = TeamQuotaRowForm
    formset = QuotaFormSet
    extra = 0
    fields = ("gpu_class", "guaranteed_milli", "limit_milli", "per_user_cap_milli")


@admin.register(TeamQuota)
class TeamQuotaAdmin(ServiceAdmin):
    list_display = ("team", "gpu_class", "guaranteed", "limit", "per_user_cap")
    list_filter = ("gpu_class", "team")
    search_fields = ("team__name", "gpu_class__name")
    list_select_related = ("team", "gpu_class")
    autocomplete_fields = ("team",)

    @admin.display(description="guaranteed (GPUs)", ordering="guaranteed_milli")
    def guaranteed(self, obj: TeamQuota) -> str:
        return gpus(obj.guaranteed_milli)

    @admin.display(description="limit (GPUs)", ordering="limit_milli")
    def limit(self, obj: TeamQuota) -> str:
        return gpus(obj.limit_milli)

    @admin.display(description="per-user cap (GPUs)", ordering="per_user_cap_milli")
    def per_user_cap(self, obj: TeamQuota) -> str:
        return gpus(obj.per_user_cap_milli)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A quota belongs to one team and class for good; move it by deleting and adding.
        return ("team", "gpu_class") if obj is not None else ()

    def save_model(
        self, request: HttpRequest, obj: TeamQuota, form: forms.ModelForm, change: bool
    ) -> None:
        try:
            result = team_quota_set(
                actor=actor(request),
                team=obj.team,
                gpu_class=obj.gpu_class,
                guaranteed_milli=obj.guaranteed_milli,
                limit_milli=obj.limit_milli,
                per_user_cap_milli=obj.per_user_cap_milli,
                source_ip=source_ip(request),
            )
        except ValidationError as exc:  # already checked by clean(); a race can still land here
            self.message_user(request, "; ".join(exc.messages), messages.ERROR)
            return
        obj.pk = result.quota.pk
        if result.warning:
            messages.warning(request, result.warning)

    def delete_model(self, request: HttpRequest, obj: TeamQuota) -> None:
        team_quota_delete(actor=actor(request), quota=obj, source_ip=source_ip(request))
