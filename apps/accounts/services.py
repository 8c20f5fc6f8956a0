from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.backends.base import SessionBase
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, OidcIdentity, Team, User, UserSession
from apps.accounts.selectors import (
    ADMIN_LOGIN,
    admin_login_keys,
    admin_login_lockout,
    admin_login_rule,
    is_team_lead,
    live_tokens_of,
    token_descendants,
)
from apps.audit.changes import diff, snapshot
from apps.audit.services import audit_record
from apps.common import taskqueue
from apps.common.ratelimit import rate_limiter

log = logging.getLogger(__name__)

log = logging.getLogger(__name__)

# --- teams ------------------------------------------------------------------------------------


def _team_conflicts(*, name: str, slug: str, exclude_pk: int | None) -> dict[str, str]:
    """Readable reasons why ``name``/``slug`` would collide with another team."""
    errors: dict[str, str] = {}
    problem = core.slug_problem(slug)
    if problem:
        errors["slug"] = problem
        return errors
    others = Team.objects.exclude(pk=exclude_pk) if exclude_pk else Team.objects.all()
    namespace = core.namespace_for_slug(slug)
    clash = others.filter(slug=slug).first() or others.filter(namespace=namespace).first()
    if clash is not None:
        errors["slug"] = (
            f"The namespace {namespace} already belongs to team “{clash.name}”. "
            "Choose another slug."
        )
    if others.filter(name__iexact=name.strip()).exists():
        errors["name"] = f"A team named “{name.strip()}” already exists."
    return errors


def team_validate(*, name: str, slug: str | None, exclude_pk: int | None = None) -> str:
    """Validate a team's name and slug; return the slug to use (derived from the name if empty)."""
    if not name or not name.strip():
        raise ValidationError({"name": "A team needs a name."})
    final_slug = slug or core.slug_from_name(name)
    errors = _team_conflicts(name=name, slug=final_slug, exclude_pk=exclude_pk)
    if errors:
        raise ValidationError(errors)
    return final_slug


def team_create(
    *,
    actor: User | None,
    name: str,
    slug: str | None = None,
    idp_group: str = "",
    idp_lead_group: str = "",
    source_ip: str | None = None,
) -> Team:
    final_slug = team_validate(name=name, slug=slug)
    try:
        with transaction.atomic():
            team = Team.objects.create(
                name=name.strip(),
                slug=final_slug,
                namespace=core.namespace_for_slug(final_slug),
                idp_group=idp_group.strip(),
                idp_lead_group=idp_lead_group.strip(),
            )
            audit_record(
                actor=actor,
                action="team.create",
                obj=team,
                source_ip=source_ip,
                details={"namespace": team.namespace, "idp_group": team.idp_group},
            )
            # Namespace, quota, policies and priority classes on every enabled cluster.
            taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(team.pk)
    except IntegrityError as exc:
        # A concurrent create won the race for the same slug, namespace, name or group.
        raise ValidationError(
            "Another team with this name, slug or identity-provider group was just created."
        ) from exc
    return team


def team_update(
    *,
    actor: User | None,
    team: Team,
    name: str,
    idp_group: str,
    idp_lead_group: str,
    source_ip: str | None = None,
) -> Team:
    """Rename a team or change its groups. The slug and namespace never change once created:
    Kubernetes objects already live there."""
    team_validate(name=name, slug=team.slug, exclude_pk=team.pk)
    with transaction.atomic():
        before = {"name": team.name, "idp_group": team.idp_group, "lead": team.idp_lead_group}
        team.name = name.strip()
        team.idp_group = idp_group.strip()
        team.idp_lead_group = idp_lead_group.strip()
        team.save()
        audit_record(
            actor=actor,
            action="team.update",
            obj=team,
            source_ip=source_ip,
            details={"before": before},
        )
    return team


def team_delete(*, actor: User | None, team: Team, source_ip: str | None = None) -> None:
    """Delete a team that has no workloads (the database protects those); its memberships and
    quotas go with it. The namespace on the clusters is left for an operator to remove."""
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="team.delete",
            obj=team,
            source_ip=source_ip,
            details={
                "slug": team.slug,
                "namespace": team.namespace,
                "idp_group": team.idp_group,
                "members": sorted(
                    Membership.objects.filter(team=team).values_list("user__username", flat=True)
                ),
            },
        )
        team.delete()


def membership_set(
    *, actor: User | None, team: Team, user: User, role: str, source_ip: str | None = None
) -> Membership:
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Unknown role {role!r}; use member or lead."})
    if actor is not None and not is_team_lead(actor, team.pk):
        raise PermissionDenied("Only a team lead or an admin may change the team's members.")
    with transaction.atomic():
        previous = (
            Membership.objects.select_for_update()
            .filter(user=user, team=team)
            .values("role", "source")
            .first()
        )
        if actor is not None and not actor.is_staff:
            # A lead must not be able to make their own access outlive the provider's group
            # (setting it makes it manual), nor take over a membership the provider owns.
            if actor.pk == user.pk:
                raise PermissionDenied(
                    "You cannot change your own membership; ask another lead or a platform admin."
                )
            if previous is not None and previous["source"] == Membership.Source.IDP:
                raise PermissionDenied(
                    "This membership comes from the identity provider's groups; change it "
                    "there, or ask a platform admin."
                )
        # A membership set by hand is manual: sign-ins no longer change or remove it.
        membership, created = Membership.objects.update_or_create(
            user=user, team=team, defaults={"role": role, "source": Membership.Source.MANUAL}
        )
        audit_record(
            actor=actor,
            action="membership.add" if created else "membership.update",
            obj=membership,
            source_ip=source_ip,
            details={"role": role, "before": previous},
        )
    return membership


def membership_remove(
    *, actor: User | None, membership: Membership, source_ip: str | None = None
) -> None:
    if actor is not None and not is_team_lead(actor, membership.team_id):
        raise PermissionDenied("Only a team lead or an admin may remove members.")
    with transaction.atomic():
        audit_record(actor=actor, action="membership.remove", obj=membership, source_ip=source_ip)
        membership.delete()


# --- users and groups (the admin's user screens) ------------------------------------------------

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


# --- sign-in ----------------------------------------------------------------------------------


def _sync_provider_groups(
    *,
    user: User,
    claims: Mapping[str, object],
    groups_claim: str,
    groups_format: str,
    admin_groups: Sequence[str],
) -> tuple[core.GroupsClaim, core.MembershipPlan, bool]:
    """Bring the user's provider memberships and admin status in line with ``claims`` (the user
    row itself is saved by the caller). Returns the claim read, the plan applied and whether
    anything changed."""
    claim = core.read_groups_claim(claims, groups_claim)
    teams = [
        core.TeamGroups(team_id=t.pk, member_group=t.idp_group, lead_group=t.idp_lead_group)
        for t in Team.objects.exclude(idp_group="", idp_lead_group="")
    ]
    current = dict(
        Membership.objects.filter(user=user, source=Membership.Source.IDP).values_list(
            "team_id", "role"
        )
    )
    plan = core.plan_memberships(
        groups=claim.groups,
        teams=teams,
        current_idp_team_ids=current,
        admin_groups=admin_groups,
        groups_format=groups_format,
    )
    changed = False
    for team_id, role in plan.roles.items():
        existing = Membership.objects.filter(user=user, team_id=team_id).first()
        if existing is None:
            Membership.objects.create(
                user=user, team_id=team_id, role=role, source=Membership.Source.IDP
            )
            changed = True
        elif existing.source == Membership.Source.IDP and existing.role != role:
            existing.role = role
            existing.save(update_fields=["role"])
            changed = True
    removed, _ = Membership.objects.filter(
        user=user, team_id__in=plan.remove_team_ids, source=Membership.Source.IDP
    ).delete()
    changed = changed or bool(removed) or user.is_staff != plan.is_admin
    user.is_staff = plan.is_admin
    user.is_superuser = plan.is_admin
    user.__dict__.pop("_team_ids", None)  # the token lookup's copy of the team ids is stale
    return claim, plan, changed


def _log_groups(
    *, user: User, when: str, claim: core.GroupsClaim, plan: core.MembershipPlan, fmt: str
) -> None:
    log.info(
        "OIDC %s of %s: groups claim is %s (OIDC_GROUPS_FORMAT=%s); groups received: %s; "
        "teams: %s; admin: %s",
        when,
        user.get_username(),
        claim.describe(),
        fmt,
        ", ".join(claim.groups) or "none",
        sorted(plan.roles) or "none",
        plan.is_admin,
    )
    if claim.shape in ("absent", "unusable"):
        log.warning(
            "OIDC %s of %s: the provider sent no usable groups claim; memberships from groups "
            "are removed. Check the provider's claim mapping and OIDC_GROUPS_CLAIM.",
            when,
            user.get_username(),
        )
    if plan.ignored_groups:
        log.warning(
            "OIDC %s of %s: groups ignored, they do not fit OIDC_GROUPS_FORMAT=%s: %s",
            when,
            user.get_username(),
            fmt,
            ", ".join(plan.ignored_groups),
        )
    if plan.unmatchable_groups:
        log.warning(
            "Configured groups that can never match with OIDC_GROUPS_FORMAT=%s: %s",
            fmt,
            ", ".join(plan.unmatchable_groups),
        )


def user_sync_oidc(
    *,
    issuer: str,
    subject: str,
    claims: Mapping[str, object],
    groups_claim: str,
    admin_groups: Sequence[str],
    groups_format: str = core.GROUPS_FORMAT_AUTO,
    refresh_token: str = "",
    source_ip: str | None = None,
) -> User:
    """Find or create the user for an identity, and bring their teams and admin status up to
    date with the groups claim of this sign-in.

    A user an admin deactivated stays deactivated: the sign-in changes nothing and is
    recorded as refused (the callback turns the inactive user away)."""
    with transaction.atomic():
        identity = (
            OidcIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=issuer, subject=subject)
            .first()
        )
        created = identity is None
        if identity is None:
            user = User.objects.create_user(username=_free_username(claims, subject))
            identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        user = identity.user
        if not user.is_active:
            log.warning("OIDC sign-in of %s refused: the account is deactivated.", user)
            audit_record(
                actor=user,
                action="auth.login_refused",
                obj=user,
                source_ip=source_ip,
                details={"issuer": issuer, "reason": "deactivated"},
            )
            return user
        user.email = str(claims.get("email") or "")[:254]
        user.display_name = str(claims.get("name") or "")[:150]
        user.first_name = str(claims.get("given_name") or "")[:150]
        user.last_name = str(claims.get("family_name") or "")[:150]
        was_admin = user.is_staff
        claim, plan, _ = _sync_provider_groups(
            user=user,
            claims=claims,
            groups_claim=groups_claim,
            groups_format=groups_format,
            admin_groups=admin_groups,
        )
        now = timezone.now()
        user.last_login = now
        user.idp_checked_at = now
        user.save()
        identity.last_login_at = now
        identity.last_groups = list(claim.groups)
        identity.refresh_token = refresh_token
        identity.save(update_fields=["last_login_at", "last_groups", "refresh_token"])
        _log_groups(user=user, when="sign-in", claim=claim, plan=plan, fmt=groups_format)
        audit_record(
            actor=user,
            action="auth.login",
            obj=user,
            source_ip=source_ip,
            details={
                "issuer": issuer,
                "new_user": created,
                "groups": list(claim.groups),
                "groups_claim": claim.describe(),
                "ignored_groups": list(plan.ignored_groups),
                "teams": sorted(plan.roles),
                "left_teams": sorted(plan.remove_team_ids),
                "admin": plan.is_admin,
                "admin_changed": was_admin != plan.is_admin,
                "refresh_token": bool(refresh_token),
            },
        )
    return user


def user_groups_confirm(
    *,
    user: User,
    identity: OidcIdentity,
    claims: Mapping[str, object],
    groups_claim: str,
    groups_format: str,
    admin_groups: Sequence[str],
    refresh_token: str,
) -> User:
    """Apply the groups the provider states now (a re-check, between sign-ins). Recorded as
    ``auth.groups_refresh`` when memberships or admin status changed."""
    with transaction.atomic():
        before = sorted(
            Membership.objects.filter(user=user, source=Membership.Source.IDP).values_list(
                "team_id", "role"
            )
        )
        was_admin = user.is_staff
        claim, plan, changed = _sync_provider_groups(
            user=user,
            claims=claims,
            groups_claim=groups_claim,
            groups_format=groups_format,
            admin_groups=admin_groups,
        )
        user.idp_checked_at = timezone.now()
        user.save(update_fields=["is_staff", "is_superuser", "idp_checked_at"])
        identity.last_groups = list(claim.groups)
        identity.refresh_token = refresh_token
        identity.save(update_fields=["last_groups", "refresh_token"])
        _log_groups(user=user, when="group re-check", claim=claim, plan=plan, fmt=groups_format)
        if changed:
            audit_record(
                actor=None,
                action="auth.groups_refresh",
                obj=user,
                details={
                    "groups": list(claim.groups),
                    "before": before,
                    "teams": sorted(plan.roles),
                    "left_teams": sorted(plan.remove_team_ids),
                    "admin": plan.is_admin,
                    "admin_changed": was_admin != plan.is_admin,
                },
            )
    return user


def user_groups_lapse(*, user: User, reason: str) -> User:
    """The provider no longer confirms what it gave the user: its memberships and admin rights
    go, the stored refresh token is dropped and every portal session of the user ends. Manual
    memberships and API tokens stay (a token then reaches only the manual teams); the next
    sign-in restores whatever the provider grants then."""
    with transaction.atomic():
        teams = sorted(
            Membership.objects.filter(user=user, source=Membership.Source.IDP).values_list(
                "team_id", flat=True
            )
        )
        Membership.objects.filter(user=user, source=Membership.Source.IDP).delete()
        was_admin = user.is_staff
        user.is_staff = False
        user.is_superuser = False
        user.idp_checked_at = None
        user.save(update_fields=["is_staff", "is_superuser", "idp_checked_at"])
        user.__dict__.pop("_team_ids", None)
        OidcIdentity.objects.filter(user=user).update(refresh_token="")
        ended = _end_sessions(UserSession.objects.filter(user=user))
        log.warning(
            "Memberships from the provider of %s lapsed (%s); %d portal session(s) ended.",
            user.get_username(),
            reason,
            ended,
        )
        audit_record(
            actor=None,
            action="auth.groups_lapsed",
            obj=user,
            details={"reason": reason, "left_teams": teams, "admin": was_admin, "sessions": ended},
        )
    return user


# --- portal sessions ---------------------------------------------------------------------------


def _session_store() -> SessionBase:
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore()
    return store


def _end_sessions(sessions: QuerySet[UserSession]) -> int:
    """Delete the Django sessions behind ``sessions`` and their index rows."""
    rows = list(sessions.values_list("pk", "session_key"))
    store = _session_store()
    for _, key in rows:
        store.delete(key)
    UserSession.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
    return len(rows)


def user_session_record(*, user: User, session_key: str, issuer: str, sid: str) -> UserSession:
    """Index a session opened by a sign-in through the provider. Rows of the user's sessions
    that have ended on their own are dropped on the way."""
    identity = OidcIdentity.objects.filter(user=user, issuer=issuer).first()
    with transaction.atomic():
        row, _ = UserSession.objects.update_or_create(
            session_key=session_key,
            defaults={"user": user, "identity": identity, "sid": sid[:255]},
        )
        horizon = timezone.now() - timedelta(seconds=settings.SESSION_COOKIE_AGE)
        store = _session_store()
        gone = [
            pk
            for pk, key in UserSession.objects.filter(
                user=user, created_at__lt=horizon
            ).values_list("pk", "session_key")
            if not store.exists(key)
        ]
        UserSession.objects.filter(pk__in=gone).delete()
    return row


def user_sessions_end(*, user: User, reason: str, source_ip: str | None = None) -> int:
    """End every portal session of ``user`` that a sign-in through the provider opened."""
    with transaction.atomic():
        ended = _end_sessions(UserSession.objects.filter(user=user))
        if ended:
            audit_record(
                actor=None,
                action="auth.sessions_end",
                obj=user,
                source_ip=source_ip,
                details={"reason": reason, "sessions": ended},
            )
    return ended


def oidc_backchannel_logout(*, logout: core.LogoutRequest, source_ip: str | None = None) -> int:
    """End the portal sessions a verified logout token names: the sessions of that provider
    session (``sid``), or every session of the subject when it names none. Sessions whose sid
    the provider never told us count as the subject's when the token names the subject."""
    sessions = UserSession.objects.filter(identity__issuer=logout.issuer)
    if logout.subject:
        sessions = sessions.filter(identity__subject=logout.subject)
        if logout.sid:
            sessions = sessions.filter(Q(sid=logout.sid) | Q(sid=""))
    else:
        sessions = sessions.filter(sid=logout.sid)
    with transaction.atomic():
        users = list(User.objects.filter(portal_sessions__in=sessions).distinct())
        ended = _end_sessions(sessions)
        for user in users:
            audit_record(
                actor=None,
                action="auth.backchannel_logout",
                obj=user,
                source_ip=source_ip,
                details={"issuer": logout.issuer, "sid": logout.sid, "sessions": ended},
            )
    return ended


def _free_username(claims: Mapping[str, object], subject: str) -> str:
    """A readable, unique username; the identity itself is issuer + subject, not this."""
    base = str(claims.get("preferred_username") or claims.get("email") or subject)
    base = base.split("@")[0][:140] or "user"
    candidate, n = base, 1
    while User.objects.filter(username=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


# --- API tokens -------------------------------------------------------------------------------


def api_token_create(
    *,
    actor: User,
    name: str,
    scopes: Sequence[str],
    expires_at: datetime | None,
    parent: ApiToken | None = None,
    source_ip: str | None = None,
) -> tuple[ApiToken, str]:
    """Create a token and return it with its plaintext, which is never stored nor shown again.

    The one home of the token rules, whichever door is used: a name; known scopes; at most
    API_TOKEN_MAX_LIFETIME_DAYS of life (asked without an expiry, the longest allowed); at
    most API_TOKEN_MAX_PER_USER live tokens per person. ``parent`` is the token the request
    was authenticated with, if any: the new token is recorded as its child, may allow nothing
    it does not, ends no later than it, and is revoked with it.
    """
    now = timezone.now()
    errors: dict[str, str] = {}
    if not name or not name.strip():
        errors["name"] = "Give the token a name, e.g. the machine or pipeline that uses it."
    unknown = [s for s in scopes if s not in core.ALL_SCOPES]
    if unknown or not scopes:
        errors["scopes"] = f"Choose at least one scope of: {', '.join(core.ALL_SCOPES)}."
    elif parent is not None and not core.token_scopes_within(scopes, parent.scopes):
        errors["scopes"] = (
            "A token created with another token cannot allow more than it: "
            f"the token you are using has the scopes {', '.join(parent.scopes)}."
        )
    if parent is not None and (parent.user_id != actor.pk or not parent.is_active(now)):
        raise PermissionDenied("Tokens can be created only with a live token of your own.")
    try:
        final_expiry = core.token_expiry(
            requested=expires_at,
            now=now,
            max_lifetime_days=settings.API_TOKEN_MAX_LIFETIME_DAYS,
            parent_ends_at=parent.ends_at if parent is not None else None,
        )
    except core.TokenRuleError as exc:
        errors[exc.field] = exc.message
    if errors:
        raise ValidationError(errors)
    material = core.token_generate()
    with transaction.atomic():
        # Lock the person's row: two creations at once would otherwise both count the same
        # live tokens and together pass the cap.
        User.objects.select_for_update().filter(pk=actor.pk).first()
        # And the parent's: a revocation committed meanwhile must not leave a child behind.
        if (
            parent is not None
            and ApiToken.objects.select_for_update()
            .filter(pk=parent.pk, revoked_at__isnull=True)
            .first()
            is None
        ):
            raise PermissionDenied("The token you are using has been revoked.")
        live = live_tokens_of(actor, now=now).count()
        cap = settings.API_TOKEN_MAX_PER_USER
        if live >= cap:
            raise ValidationError(
                {
                    "non_field_errors": (
                        f"You have {live} live tokens, the most one person may hold ({cap}). "
                        "Revoke one you no longer use, then create this one."
                    )
                }
            )
        token = ApiToken.objects.create(
            user=actor,
            name=name.strip(),
            lookup=material.lookup,
            digest=material.digest,
            scopes=sorted(set(scopes)),
            expires_at=final_expiry,
            parent=parent,
            created_at=now,
        )
        audit_record(
            actor=actor,
            action="token.create",
            obj=token,
            source_ip=source_ip,
            details={
                "scopes": token.scopes,
                "expires_at": final_expiry.isoformat() if final_expiry else None,
                "parent": parent.pk if parent is not None else None,
            },
        )
    return token, material.plaintext


def api_token_revoke(*, actor: User, token: ApiToken, source_ip: str | None = None) -> ApiToken:
    """Revoke a token and every token created with it (and with those, all the way down)."""
    if token.user_id != actor.pk and not actor.is_staff:
        raise PermissionDenied("This token belongs to someone else.")
    now = timezone.now()
    with transaction.atomic():
        # Conditional update: a second revoke (double click, retry) changes nothing.
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        if changed:
            audit_record(actor=actor, action="token.revoke", obj=token, source_ip=source_ip)
        # Descendants are revoked even when the token itself already was, so that a child
        # created by a race with the revocation does not survive it.
        for child in token_descendants(token).filter(revoked_at__isnull=True):
            if ApiToken.objects.filter(pk=child.pk, revoked_at__isnull=True).update(revoked_at=now):
                audit_record(
                    actor=actor,
                    action="token.revoke",
                    obj=child,
                    source_ip=source_ip,
                    details={"reason": "revoked with the token that created it", "root": token.pk},
                )
    token.refresh_from_db()
    return token


def api_token_touch(*, token: ApiToken, now: datetime, min_interval_seconds: int = 60) -> None:
    """Record use without writing on every request: at most once a minute per token."""
    if token.last_used_at and (now - token.last_used_at).total_seconds() < min_interval_seconds:
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now


# --- password sign-in -------------------------------------------------------------------------


def admin_login_failure_record(*, username: str, source_ip: str | None) -> bool:
    """Count a failed password sign-in against the username and the client address, and
    audit it; return True when it locks either out (audited as well)."""
    rule = admin_login_rule()
    limiter = rate_limiter()
    keys = admin_login_keys(username=username, source_ip=source_ip)
    for key in keys:
        limiter.hit(rule, key, namespace=ADMIN_LOGIN, exact=True)
    lockout = admin_login_lockout(username=username, source_ip=source_ip)
    locked = not lockout.allowed
    user = User.objects.filter(username=username).first()
    details = {"username": username[:150]}
    with transaction.atomic():
        audit_record(
            actor=None,
            action="auth.admin_login_failed",
            obj=user,
            source_ip=source_ip,
            details=details,
        )
        if locked:
            audit_record(
                actor=None,
                action="auth.admin_lockout",
                obj=user,
                source_ip=source_ip,
                details={
                    **details,
                    "failures": settings.ADMIN_LOGIN_MAX_FAILURES,
                    "seconds": lockout.retry_after,
                },
            )
    log.warning(
        "admin password sign-in failed for %r from %s%s",
        username[:150],
        source_ip,
        f"; locked out for {lockout.retry_after}s" if locked else "",
    )
    return locked


def admin_login_success_record(*, user: User, source_ip: str | None) -> None:
    """Audit a password sign-in to the admin, saying whether it used the break-glass switch
    (ADMIN_PASSWORD_LOGIN with single sign-on on)."""
    break_glass = bool(settings.OIDC_ENABLED)
    audit_record(
        actor=user,
        action="auth.admin_password_login",
        obj=user,
        source_ip=source_ip,
        details={"break_glass": break_glass},
    )
    if break_glass:
        log.warning(
            "break-glass admin password sign-in by %s from %s (ADMIN_PASSWORD_LOGIN is on)",
            user.get_username(),
            source_ip,
        )
