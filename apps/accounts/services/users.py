"""Users and permission groups as the Django admin's user screens change them: access and
privilege changes audited, passwords, deletions."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied
from django.db import transaction

from apps.accounts.models import OidcIdentity, User
from apps.audit.changes import diff, snapshot
from apps.audit.services import audit_record

log = logging.getLogger(__name__)


# Who may do what: the admin flags, groups and permissions. A change to any of them is recorded
# as ``user.access`` so the trail of privilege changes can be read on its own.
ACCESS_FIELDS = frozenset({"is_active", "is_staff", "is_superuser", "groups", "user_permissions"})
# Changing these grants admin rights; only a superuser may do that.
PRIVILEGE_FIELDS = frozenset({"is_staff", "is_superuser", "groups", "user_permissions"})


def _permission_names(permissions: Iterable[Permission]) -> list[str]:
    return sorted(f"{p.content_type.app_label}.{p.codename}" for p in permissions)


def _user_state(user: User) -> dict[str, Any]:
    state = snapshot(user, exclude=("password",))
    if user.pk is not None:
        state["groups"] = sorted(user.groups.values_list("name", flat=True))
        state["user_permissions"] = _permission_names(
            user.user_permissions.select_related("content_type")
        )
    return state


def user_admin_save(
    *,
    actor: User | None,
    user: User,
    groups: Iterable[Group] | None = None,
    permissions: Iterable[Permission] | None = None,
    source_ip: str | None = None,
) -> User:
    """Create a user, or save the edits made to one: profile, admin flags, groups and
    permissions (``None`` leaves those as they are). Records ``user.create``, or
    ``user.access`` when the flags, groups or permissions changed, else ``user.update``, with
    every changed value except the password hash (only that it changed)."""
    with transaction.atomic():
        created = user.pk is None
        if created:
            before: dict[str, Any] = {}
            password_before = ""
        else:
            stored = User.objects.select_for_update().get(pk=user.pk)
            before = _user_state(stored)
            password_before = stored.password
        user.save()
        if groups is not None:
            user.groups.set(groups)
        if permissions is not None:
            user.user_permissions.set(permissions)
        after = _user_state(user)
        changes = diff(before, after) if not created else {}
        granted = {k for k in PRIVILEGE_FIELDS if after.get(k)} if created else changes.keys()
        if PRIVILEGE_FIELDS & granted and not (actor is None or actor.is_superuser):
            # Raised inside the transaction: nothing of this save is kept.
            raise PermissionDenied("Only a superuser may grant or withdraw admin rights.")
        if created:
            details: dict[str, Any] = {
                "after": after,
                "password_usable": user.has_usable_password(),
            }
            action = "user.create"
        elif changes or user.password != password_before:
            details = {"changed": changes}
            if user.password != password_before:
                details["password_changed"] = True
            action = "user.access" if changes.keys() & ACCESS_FIELDS else "user.update"
        else:
            return user
        audit_record(actor=actor, action=action, obj=user, source_ip=source_ip, details=details)
    return user


def user_password_set(
    *, actor: User | None, user: User, password: str | None, source_ip: str | None = None
) -> User:
    """Set a user's password, or (``None``) turn password sign-in off for them. The trail
    says which, never the password."""
    with transaction.atomic():
        if password is None:
            user.set_unusable_password()
        else:
            user.set_password(password)
        user.save(update_fields=["password"])
        audit_record(
            actor=actor,
            action="user.password",
            obj=user,
            source_ip=source_ip,
            details={"password_usable": password is not None},
        )
    return user


def user_delete(*, actor: User | None, user: User, source_ip: str | None = None) -> None:
    """Delete a user who owns no workloads (the database protects those); their memberships,
    identities and tokens go with them."""
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="user.delete",
            obj=user,
            source_ip=source_ip,
            details={"before": _user_state(user)},
        )
        user.delete()


def oidc_identity_delete(
    *, actor: User | None, identity: OidcIdentity, source_ip: str | None = None
) -> None:
    """Unlink an identity-provider account from its user: its next sign-in makes a new user."""
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="oidcidentity.delete",
            obj=identity,
            source_ip=source_ip,
            details={"user": identity.user.get_username(), "issuer": identity.issuer},
        )
        identity.delete()


def group_save(
    *,
    actor: User | None,
    group: Group,
    permissions: Iterable[Permission],
    source_ip: str | None = None,
) -> Group:
    """Create or change a permission group; its members' rights change with it."""
    if actor is not None and not actor.is_superuser:
        raise PermissionDenied("Only a superuser may change permission groups.")
    with transaction.atomic():
        created = group.pk is None
        before = (
            {}
            if created
            else {
                "name": Group.objects.select_for_update().get(pk=group.pk).name,
                "permissions": _permission_names(group.permissions.select_related("content_type")),
            }
        )
        group.save()
        group.permissions.set(permissions)
        after = {
            "name": group.name,
            "permissions": _permission_names(group.permissions.select_related("content_type")),
        }
        changes = diff(before, after)
        if created or changes:
            audit_record(
                actor=actor,
                action="group.create" if created else "group.update",
                obj=group,
                source_ip=source_ip,
                details={"after": after} if created else {"changed": changes},
            )
    return group


def group_delete(*, actor: User | None, group: Group, source_ip: str | None = None) -> None:
    if actor is not None and not actor.is_superuser:
        raise PermissionDenied("Only a superuser may change permission groups.")
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="group.delete",
            obj=group,
            source_ip=source_ip,
            details={"members": sorted(group.user_set.values_list("username", flat=True))},
        )
        group.delete()
