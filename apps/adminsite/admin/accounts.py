"""The admin pages of accounts: teams with their memberships, users with their identities
and passwords, groups and API tokens. Saves, deletes and actions go through
:mod:`apps.accounts.services`, so the audit trail does not depend on the screen used."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, OidcIdentity, Team, User
from apps.accounts.roles import ROLE_LABELS, Act, Role, roles_from
from apps.accounts.selectors import platform_may
from apps.accounts.services import (
    api_token_revoke,
    group_delete,
    group_save,
    membership_remove,
    membership_set,
    oidc_identity_delete,
    team_create,
    team_delete,
    team_update,
    team_validate,
    user_admin_save,
    user_delete,
    user_password_set,
)
from apps.adminsite.admin.base import (
    KeyLockedForm,
    SafeAutocompleteMixin,
    ServiceAdmin,
    ServiceFormSet,
    actor,
    source_ip,
)
from apps.adminsite.admin.quotas import TeamQuotaInline

# --- memberships ------------------------------------------------------------------------------


class MembershipFormSet(ServiceFormSet):
    """Membership rows of a team or of a user, each written by ``membership_set`` or
    ``membership_remove``."""

    def save_through_services(self, request: HttpRequest) -> list[str]:
        saved, deleted = self.pending()
        for membership in deleted:
            assert isinstance(membership, Membership)
            membership_remove(
                actor=actor(request), membership=membership, source_ip=source_ip(request)
            )
        for membership in saved:
            assert isinstance(membership, Membership)
            stored = membership_set(
                actor=actor(request),
                team=membership.team,
                user=membership.user,
                role=membership.role,
                source_ip=source_ip(request),
            )
            membership.pk = stored.pk
        return []


class MembershipRowForm(KeyLockedForm):
    locked = ("user", "team")


class MembershipInline(SafeAutocompleteMixin, admin.TabularInline):
    """A team's members."""

    model = Membership
    form = MembershipRowForm
    formset = MembershipFormSet
    extra = 0
    autocomplete_fields = ("user",)
    fields = ("user", "role", "source", "created_at")
    readonly_fields = ("source", "created_at")


class UserMembershipInline(SafeAutocompleteMixin, admin.TabularInline):
    """A user's teams."""

    model = Membership
    form = MembershipRowForm
    formset = MembershipFormSet
    extra = 0
    autocomplete_fields = ("team",)
    fields = ("team", "role", "source", "created_at")
    readonly_fields = ("source", "created_at")


@admin.register(Membership)
class MembershipAdmin(ServiceAdmin):
    list_display = ("user", "team", "role", "source", "created_at")
    list_filter = ("role", "source", "team")
    search_fields = ("user__username", "user__email", "team__name")
    list_select_related = ("user", "team")
    autocomplete_fields = ("user", "team")
    fields = ("user", "team", "role", "source", "created_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Set by hand means manual; a membership never moves to another user or team.
        if obj is not None:
            return ("user", "team", "source", "created_at")
        return ("source", "created_at")

    def save_model(
        self, request: HttpRequest, obj: Membership, form: forms.ModelForm, change: bool
    ) -> None:
        if change and not form.has_changed():
            return
        stored = membership_set(
            actor=actor(request),
            team=obj.team,
            user=obj.user,
            role=obj.role,
            source_ip=source_ip(request),
        )
        obj.pk = stored.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(actor=actor(request), membership=obj, source_ip=source_ip(request))


# --- teams ------------------------------------------------------------------------------------


class TeamAdminForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ("name", "slug", "idp_group", "idp_lead_group", "allow_burst")

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
class TeamAdmin(ServiceAdmin):
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
        if change and not form.has_changed():
            return  # only the inlines changed: their services record that
        data = form.cleaned_data
        if change:
            team_update(
                actor=actor(request),
                team=obj,
                name=data["name"],
                idp_group=data.get("idp_group", ""),
                idp_lead_group=data.get("idp_lead_group", ""),
                source_ip=source_ip(request),
            )
        else:
            created = team_create(
                actor=actor(request),
                name=data["name"],
                slug=data.get("slug") or None,
                idp_group=data.get("idp_group", ""),
                idp_lead_group=data.get("idp_lead_group", ""),
                source_ip=source_ip(request),
            )
            obj.pk = created.pk
            obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        team_delete(actor=actor(request), team=obj, source_ip=source_ip(request))


# --- users ------------------------------------------------------------------------------------


class OidcIdentityFormSet(ServiceFormSet):
    """Identity rows are shown, never edited; deleting one unlinks it through the service."""

    def save_through_services(self, request: HttpRequest) -> list[str]:
        _, deleted = self.pending()
        for identity in deleted:
            assert isinstance(identity, OidcIdentity)
            oidc_identity_delete(
                actor=actor(request), identity=identity, source_ip=source_ip(request)
            )
        return []


class OidcIdentityInline(admin.TabularInline):
    model = OidcIdentity
    formset = OidcIdentityFormSet
    extra = 0
    readonly_fields = ("issuer", "subject", "created_at", "last_login_at", "last_groups")
    can_delete = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


# The admin request of the password form being saved: Django builds that form with the user
# alone, and the service needs the acting admin and their address.
_password_request: ContextVar[HttpRequest | None] = ContextVar("password_request", default=None)


class PasswordForm(AdminPasswordChangeForm):
    def save(self, commit: bool = True) -> Any:
        request = _password_request.get()
        assert request is not None, "PasswordForm is saved only by UserAdmin"
        usable = self.cleaned_data["set_usable_password"]
        return user_password_set(
            actor=actor(request),
            user=self.user,
            password=self.cleaned_data["password1"] if usable else None,
            source_ip=source_ip(request),
        )


@admin.register(User)
class UserAdmin(ServiceAdmin, DjangoUserAdmin):
    list_display = (
        "username",
        "display_name",
        "email",
        "roles",
        "is_staff",
        "is_active",
        "last_login",
    )
    list_filter = ("is_superuser", "groups", "is_staff", "is_active", "memberships__team")
    search_fields = ("username", "display_name", "email", "oidc_identities__subject")
    inlines = (OidcIdentityInline, UserMembershipInline)
    fieldsets = (*DjangoUserAdmin.fieldsets, ("Profile", {"fields": ("display_name",)}))  # type: ignore[misc]
    change_password_form = PasswordForm
    saves_many_to_many = True

    def save_model(
        self, request: HttpRequest, obj: User, form: forms.ModelForm, change: bool
    ) -> None:
        data = form.cleaned_data
        user_admin_save(
            actor=actor(request),
            user=obj,
            groups=data["groups"] if "groups" in form.fields else None,
            permissions=data["user_permissions"] if "user_permissions" in form.fields else None,
            source_ip=source_ip(request),
        )

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="platform roles")
    def roles(self, obj: User) -> str:
        # From the prefetched groups: one read for the whole list.
        held = roles_from(
            superuser=obj.is_superuser, group_names=[g.name for g in obj.groups.all()]
        )
        return ", ".join(ROLE_LABELS[r] for r in Role if r in held) or "—"

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        user_delete(actor=actor(request), user=obj, source_ip=source_ip(request))

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        token = _password_request.set(request)
        try:
            return super().user_change_password(request, id, form_url)
        finally:
            _password_request.reset(token)


admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(ServiceAdmin, DjangoGroupAdmin):
    saves_many_to_many = True

    def save_model(
        self, request: HttpRequest, obj: Group, form: forms.ModelForm, change: bool
    ) -> None:
        group_save(
            actor=actor(request),
            group=obj,
            permissions=form.cleaned_data["permissions"],
            source_ip=source_ip(request),
        )

    def delete_model(self, request: HttpRequest, obj: Group) -> None:
        group_delete(actor=actor(request), group=obj, source_ip=source_ip(request))


# --- API tokens -------------------------------------------------------------------------------


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

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Shown, never edited: the revoke action is the one write, through its service.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Revoked, never deleted, so the trail keeps what the token was.
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return platform_may(request.user, Act.GOVERN_TEAMS)  # type: ignore[arg-type]

    @admin.display(description="token")
    def prefix(self, obj: ApiToken) -> str:
        return f"{core.TOKEN_PREFIX}_{obj.lookup}_…"

    @admin.display(description="state")
    def state(self, obj: ApiToken) -> str:
        if obj.revoked_at:
            return "revoked"
        return "active" if obj.is_active(timezone.now()) else "expired"

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = 0
        for token in queryset.filter(revoked_at__isnull=True):
            api_token_revoke(actor=request.user, token=token, source_ip=source_ip(request))  # type: ignore[arg-type]
            count += 1
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
