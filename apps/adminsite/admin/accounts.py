from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, OidcIdentity, Team, User
from apps.accounts.services import api_token_revoke, team_create, team_update, team_validate
from apps.audit.services import audit_record
from apps.common import taskqueue
from apps.common.http import client_ip
from apps.quotas.models import TeamQuota


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ("user",)
    fields = ("user", "role", "source", "created_at")
    readonly_fields = ("created_at",)


class TeamQuotaInline(admin.TabularInline):
    model = TeamQuota
    extra = 0
    fields = ("gpu_class", "guaranteed_milli", "limit_milli", "per_user_cap_milli")


class TeamAdminForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ("name", "slug", "idp_group", "idp_lead_group")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["slug"].required = False
        self.fields["slug"].help_text = (
            "Names the Kubernetes namespace team-<slug>. Leave empty to derive it from the name. "
            "It cannot change after creation."
        )
        if self.instance.pk:
            self.fields["slug"].disabled = True

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        name = data.get("name") or ""
        if name:
            try:
                data["slug"] = team_validate(
                    name=name,
                    slug=self.instance.slug if self.instance.pk else data.get("slug"),
                    exclude_pk=self.instance.pk,
                )
            except ValidationError as exc:
                for field, errs in exc.message_dict.items():
                    self.add_error(field if field in self.fields else None, list(errs))
        return data


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamAdminForm
    list_display = ("name", "slug", "namespace", "idp_group", "idp_lead_group", "member_count")
    search_fields = ("name", "slug", "namespace", "idp_group")
    readonly_fields = ("namespace", "created_at")
    inlines = (MembershipInline, TeamQuotaInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return super().get_queryset(request).annotate(_members=Count("memberships"))

    @admin.display(description="members", ordering="_members")
    def member_count(self, obj: Team) -> int:
        return getattr(obj, "_members", 0)

    def save_model(
        self, request: HttpRequest, obj: Team, form: forms.ModelForm, change: bool
    ) -> None:
        actor = request.user if isinstance(request.user, User) else None
        data = form.cleaned_data
        if change:
            team_update(
                actor=actor,
                team=obj,
                name=data["name"],
                idp_group=data.get("idp_group", ""),
                idp_lead_group=data.get("idp_lead_group", ""),
                source_ip=client_ip(request),
            )
        else:
            created = team_create(
                actor=actor,
                name=data["name"],
                slug=data.get("slug") or None,
                idp_group=data.get("idp_group", ""),
                idp_lead_group=data.get("idp_lead_group", ""),
                source_ip=client_ip(request),
            )
            obj.pk = created.pk
            obj.refresh_from_db()

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is TeamQuota:
            from apps.quotas.selectors import guarantee_warning_for_class

            for quota_form in formset.forms:
                instance = quota_form.instance
                if instance.pk and quota_form.has_changed():
                    audit_record(
                        actor=request.user,  # type: ignore[arg-type]
                        action="quota.update",
                        obj=instance,
                        source_ip=client_ip(request),
                        details={"changed": quota_form.changed_data},
                    )
                    warning = guarantee_warning_for_class(instance.gpu_class)
                    if warning:
                        messages.warning(request, warning)
            if formset.has_changed():
                taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(form.instance.pk)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "team", "role", "source", "created_at")
    list_filter = ("role", "source", "team")
    search_fields = ("user__username", "user__email", "team__name")
    list_select_related = ("user", "team")
    autocomplete_fields = ("user", "team")


class OidcIdentityInline(admin.TabularInline):
    model = OidcIdentity
    extra = 0
    readonly_fields = ("issuer", "subject", "created_at", "last_login_at", "last_groups")
    can_delete = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ("username", "display_name", "email", "is_staff", "is_active", "last_login")
    list_filter = ("is_staff", "is_superuser", "is_active", "memberships__team")
    search_fields = ("username", "display_name", "email", "oidc_identities__subject")
    inlines = (OidcIdentityInline, MembershipInline)
    fieldsets = (*DjangoUserAdmin.fieldsets, ("Profile", {"fields": ("display_name",)}))  # type: ignore[misc]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "user",
        "prefix",
        "scopes",
        "created_at",
        "expires_at",
        "last_used_at",
        "state",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at")
    search_fields = ("name", "user__username", "lookup")
    list_select_related = ("user",)
    readonly_fields = (
        "user",
        "name",
        "lookup",
        "scopes",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    exclude = ("digest",)
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Tokens are created by their owner in the portal, where the secret is shown once.
        return False

    @admin.display(description="token")
    def prefix(self, obj: ApiToken) -> str:
        return f"{core.TOKEN_PREFIX}_{obj.lookup}_…"

    @admin.display(description="state")
    def state(self, obj: ApiToken) -> str:
        if obj.revoked_at:
            return "revoked"
        return "active" if obj.is_active(timezone.now()) else "expired"

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(actor=request.user, token=token, source_ip=client_ip(request))  # type: ignore[arg-type]
            count += 1
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
