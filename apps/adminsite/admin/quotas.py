from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from apps.common.http import client_ip
from apps.quotas.models import TeamQuota
from apps.quotas.services import team_quota_delete, team_quota_set


@admin.register(TeamQuota)
class TeamQuotaAdmin(admin.ModelAdmin):
    list_display = ("team", "gpu_class", "guaranteed_milli", "limit_milli", "per_user_cap_milli")
    list_filter = ("gpu_class", "team")
    search_fields = ("team__name", "gpu_class__name")
    list_select_related = ("team", "gpu_class")
    autocomplete_fields = ("team",)

    def save_model(
        self, request: HttpRequest, obj: TeamQuota, form: forms.ModelForm, change: bool
    ) -> None:
        try:
            result = team_quota_set(
                actor=request.user,  # type: ignore[arg-type]
                team=obj.team,
                gpu_class=obj.gpu_class,
                guaranteed_milli=obj.guaranteed_milli,
                limit_milli=obj.limit_milli,
                per_user_cap_milli=obj.per_user_cap_milli,
                source_ip=client_ip(request),
            )
        except ValidationError as exc:  # already checked by clean(); a race can still land here
            self.message_user(request, "; ".join(exc.messages), messages.ERROR)
            return
        obj.pk = result.quota.pk
        if result.warning:
            messages.warning(request, result.warning)

    def delete_model(self, request: HttpRequest, obj: TeamQuota) -> None:
        team_quota_delete(actor=request.user, quota=obj, source_ip=client_ip(request))  # type: ignore[arg-type]

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for quota in queryset:
            self.delete_model(request, quota)
