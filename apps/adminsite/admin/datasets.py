from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from apps.adminsite.admin.base import ServiceAdmin, actor, source_ip
from apps.datasets import core
from apps.datasets.models import Dataset
from apps.datasets.services import dataset_register, dataset_remove


class DatasetForm(forms.ModelForm):
    class Meta:
        model = Dataset
        fields = ("team", "name", "kind", "claim", "uri", "secret")

    def clean(self) -> dict[str, Any]:
        # The service's field messages, shown on the form rather than as a server error.
        data = super().clean() or {}
        errors = core.problems(
            name=data.get("name") or "",
            kind=data.get("kind") or "",
            claim=data.get("claim") or "",
            uri=data.get("uri") or "",
        )
        secret, team = data.get("secret"), data.get("team")
        if secret is not None and (
            team is None or secret.team_id != team.pk or secret.owner_id is not None
        ):
            errors["secret"] = "Choose a team secret of the dataset's team."  # noqa: S105
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(Dataset)
class DatasetAdmin(ServiceAdmin):
    """Datasets are registered and removed here or by the team's leads; a registration is not
    edited (remove it and register again)."""

    form = DatasetForm
    list_display = ("name", "team", "kind", "claim", "uri", "registered_by", "created_at")
    list_filter = ("kind", "team")
    search_fields = ("name", "claim", "uri")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: Dataset, form: forms.ModelForm, change: bool
    ) -> None:
        user = actor(request)
        assert user is not None
        created = dataset_register(
            actor=user,
            team=obj.team,
            name=obj.name,
            kind=obj.kind,
            claim=obj.claim,
            uri=obj.uri,
            secret=obj.secret.name if obj.secret is not None else "",
            source_ip=source_ip(request),
        )
        obj.pk = created.pk

    def delete_model(self, request: HttpRequest, obj: Dataset) -> None:
        user = actor(request)
        assert user is not None
        dataset_remove(actor=user, dataset=obj, source_ip=source_ip(request))
