"""Sign-in through the identity provider: a user synced from the ID token's claims, their groups
mapped to teams, confirmed or lapsed at the re-check (a user disabled at the provider loses
their API tokens)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from apps.accounts import core, providers
from apps.accounts.models import ApiToken, Membership, OidcIdentity, Team, User, UserSession
from apps.accounts.roles import ROLE_GROUPS, Role
from apps.accounts.selectors import (
    forget_role_copy,
    forget_team_copies,
    platform_roles,
)
from apps.accounts.services.sessions import _end_sessions
from apps.audit.services import audit_record

log = logging.getLogger(__name__)


class LinkRefused(Exception):
    """A first sign-in that may not become an account: its verified e-mail is that of an
    account signing in through another provider (apps.accounts.providers.link_decision)."""


@dataclass(frozen=True)
class LinkPolicy:
    """What a first sign-in needs to decide on linking: the provider signing in, the names of
    the issuers, and whom people ask."""

    provider: providers.Provider
    issuer_names: Mapping[str, str]
    contact: str


def _team_groups(teams: Mapping[str, providers.TeamMapping] | None) -> list[core.TeamGroups]:
    """The teams' groups at the provider signing in: its own mapping by team slug, or the
    teams' IdP group fields."""
    if teams is None:
        return [
            core.TeamGroups(team_id=t.pk, member_group=t.idp_group, lead_group=t.idp_lead_group)
            for t in Team.objects.exclude(idp_group="", idp_lead_group="")
        ]
    ids = dict(Team.objects.filter(slug__in=list(teams)).values_list("slug", "pk"))
    unknown = sorted(set(teams) - set(ids))
    if unknown:
        log.warning("The provider's team mapping names teams that do not exist: %s", unknown)
    return [
        core.TeamGroups(team_id=ids[slug], member_group=m.member, lead_group=m.lead)
        for slug, m in teams.items()
        if slug in ids
    ]


def _holders(*, email: str, issuer: str, names: Mapping[str, str]) -> list[providers.Holder]:
    """Accounts that sign in through another provider with this e-mail."""
    if not email:
        return []
    by_user: dict[int, set[str]] = {}
    rows = (
        OidcIdentity.objects.filter(user__email__iexact=email)
        .exclude(issuer=issuer)
        .values_list("user_id", "issuer")
    )
    for user_id, other in rows:
        by_user.setdefault(user_id, set()).add(names.get(other, other))
    return [
        providers.Holder(user_id=k, provider_names=tuple(sorted(v))) for k, v in by_user.items()
    ]


def _sync_provider_groups(
    *,
    user: User,
    claims: Mapping[str, object],
    groups_claim: str,
    groups_format: str,
    admin_groups: Sequence[str],
    role_groups: Mapping[str, Sequence[str]] | None = None,
    team_map: Mapping[str, providers.TeamMapping] | None = None,
) -> tuple[core.GroupsClaim, core.MembershipPlan, bool]:
    """Bring the user's provider memberships and platform roles in line with ``claims`` (the
    user row itself is saved by the caller). Returns the claim read, the plan applied and
    whether anything changed."""
    claim = core.read_groups_claim(claims, groups_claim)
    teams = _team_groups(team_map)
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
        role_groups=role_groups,
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
    roles_changed = _platform_roles_set(user=user, plan=plan)
    changed = changed or bool(removed) or roles_changed
    forget_team_copies(user)  # the token lookup's copy of the team ids is stale
    return claim, plan, changed


def _platform_roles_set(*, user: User, plan: core.MembershipPlan) -> bool:
    """The provider's word on the user's platform roles: admin is the superuser flag, the
    others membership of the roles' permission groups; any role lets them into the admin (the
    staff flag, which grants nothing by itself). Returns whether anything changed."""
    held = {Role(role) for role in plan.platform_roles} | ({Role.ADMIN} if plan.is_admin else set())
    before = platform_roles(user)
    staff = bool(held)
    flags_changed = user.is_staff != staff or user.is_superuser != plan.is_admin
    user.is_staff = staff
    user.is_superuser = plan.is_admin
    wanted = {ROLE_GROUPS[role] for role in held if role in ROLE_GROUPS}
    groups = {group.name: group for group in Group.objects.filter(name__in=ROLE_GROUPS.values())}
    for name in wanted - set(groups):
        # Made by the migration; one deleted by hand comes back empty, so that the role still
        # counts in the portal and the API (the admin shows nothing until it has permissions).
        log.warning("The permission group %r of a platform role was missing; made again.", name)
        groups[name] = Group.objects.create(name=name)
    user.groups.remove(*[g for name, g in groups.items() if name not in wanted])
    user.groups.add(*[g for name, g in groups.items() if name in wanted])
    forget_role_copy(user)
    return flags_changed or before != frozenset(held)


def _role_names(plan: core.MembershipPlan) -> list[str]:
    return sorted({*plan.platform_roles, *([Role.ADMIN.value] if plan.is_admin else [])})


def _log_groups(
    *, user: User, when: str, claim: core.GroupsClaim, plan: core.MembershipPlan, fmt: str
) -> None:
    log.info(
        "OIDC %s of %s: groups claim is %s (OIDC_GROUPS_FORMAT=%s); groups received: %s; "
        "teams: %s; admin: %s; platform roles: %s",
        when,
        user.get_username(),
        claim.describe(),
        fmt,
        ", ".join(claim.groups) or "none",
        sorted(plan.roles) or "none",
        plan.is_admin,
        ", ".join(_role_names(plan)) or "none",
    )
    if claim.shape in ("absent", "unusable"):
        log.warning(
            "OIDC %s of %s: the provider sent no usable groups claim; memberships from groups "
            "are removed. Check the provider's claim mapping and OIDC_GROUPS_CLAIM.",
            when,
            user.get_username(),
        )
    if claim.groups and not plan.roles and not plan.is_admin and not plan.platform_roles:
        log.warning(
            "OIDC %s of %s: no group maps to a team (OIDC_GROUPS_FORMAT=%s); groups received: "
            "%s. Set a team's identity-provider group to one of them, as the provider writes "
            "it (a full path such as /team-vision, or its name).",
            when,
            user.get_username(),
            fmt,
            ", ".join(claim.groups),
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


def user_sync_oidc(**kwargs: Any) -> User:
    """:func:`_user_sync_oidc`; a refused first sign-in is recorded (``auth.login_refused``)
    after its transaction rolled back, then raised on."""
    try:
        return _user_sync_oidc(**kwargs)
    except LinkRefused as exc:
        claims = kwargs.get("claims") or {}
        log.warning(
            "OIDC first sign-in of %s at %s refused: %s",
            kwargs.get("subject"),
            kwargs.get("issuer"),
            exc,
        )
        audit_record(
            actor=None,
            action="auth.login_refused",
            source_ip=kwargs.get("source_ip"),
            details={
                "issuer": kwargs.get("issuer"),
                "subject": kwargs.get("subject"),
                "email": str(claims.get("email") or ""),
                "reason": "the verified e-mail of an account at another provider",
            },
        )
        raise


def _user_sync_oidc(
    *,
    issuer: str,
    subject: str,
    claims: Mapping[str, object],
    groups_claim: str,
    admin_groups: Sequence[str],
    role_groups: Mapping[str, Sequence[str]] | None = None,
    groups_format: str = core.GROUPS_FORMAT_AUTO,
    teams: Mapping[str, providers.TeamMapping] | None = None,
    link: LinkPolicy | None = None,
    refresh_token: str = "",
    refresh_by: datetime | None = None,
    source_ip: str | None = None,
) -> User:
    """Find or create the user for an identity, and bring their teams and admin status up to
    date with the groups claim of this sign-in.

    A first sign-in whose verified e-mail belongs to an account of another provider is linked
    to it or refused (``link``; :func:`apps.accounts.providers.link_decision`): raises
    :class:`LinkRefused` with the words for the person, recorded as ``auth.login_refused``.
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
        linked = False
        if identity is None:
            decision = providers.LinkDecision("new")
            if link is not None:
                decision = providers.link_decision(
                    provider=link.provider,
                    claims=claims,
                    holders=_holders(
                        email=str(claims.get("email") or "").strip(),
                        issuer=issuer,
                        names=link.issuer_names,
                    ),
                    contact=link.contact,
                )
            if decision.action == "refuse":
                raise LinkRefused(decision.reason)
            if decision.action == "link" and decision.user_id is not None:
                user = User.objects.get(pk=decision.user_id)
                linked = True
            else:
                user = User.objects.create_user(username=_free_username(claims, subject))
            identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            if linked:
                audit_record(
                    actor=user,
                    action="auth.identity_linked",
                    obj=user,
                    source_ip=source_ip,
                    details={
                        "issuer": issuer,
                        "subject": subject,
                        "by": "verified e-mail",
                        "email": str(claims.get("email") or ""),
                    },
                )
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
        was_admin = user.is_superuser
        roles_before = platform_roles(user)
        claim, plan, _ = _sync_provider_groups(
            user=user,
            claims=claims,
            groups_claim=groups_claim,
            groups_format=groups_format,
            admin_groups=admin_groups,
            role_groups=role_groups,
            team_map=teams,
        )
        now = timezone.now()
        user.last_login = now
        user.idp_checked_at = now
        user.idp_refresh_by = refresh_by
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
                "new_user": created and not linked,
                "linked": linked,
                "groups": list(claim.groups),
                "groups_claim": claim.describe(),
                "ignored_groups": list(plan.ignored_groups),
                "teams": sorted(plan.roles),
                "left_teams": sorted(plan.remove_team_ids),
                "admin": plan.is_admin,
                "admin_changed": was_admin != plan.is_admin,
                "platform_roles": _role_names(plan),
                "platform_roles_before": sorted(roles_before),
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
    refresh_by: datetime | None = None,
    role_groups: Mapping[str, Sequence[str]] | None = None,
    teams: Mapping[str, providers.TeamMapping] | None = None,
) -> User:
    """Apply the groups the provider states now (a re-check, between sign-ins). Recorded as
    ``auth.groups_refresh`` when memberships or admin status changed."""
    with transaction.atomic():
        before = sorted(
            Membership.objects.filter(user=user, source=Membership.Source.IDP).values_list(
                "team_id", "role"
            )
        )
        was_admin = user.is_superuser
        roles_before = platform_roles(user)
        claim, plan, changed = _sync_provider_groups(
            user=user,
            claims=claims,
            groups_claim=groups_claim,
            groups_format=groups_format,
            admin_groups=admin_groups,
            role_groups=role_groups,
            team_map=teams,
        )
        user.idp_checked_at = timezone.now()
        user.idp_refresh_by = refresh_by
        user.save(update_fields=["is_staff", "is_superuser", "idp_checked_at", "idp_refresh_by"])
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
                    "platform_roles": _role_names(plan),
                    "platform_roles_before": sorted(roles_before),
                },
            )
    return user


def user_groups_lapse(*, user: User, reason: str, user_gone: bool = False) -> User:
    """The provider no longer confirms what it gave the user: its memberships and admin rights
    go, the stored refresh token is dropped and every portal session of the user ends. Manual
    memberships and API tokens stay (a token then reaches only the manual teams); the next
    sign-in restores whatever the provider grants then.

    ``user_gone``: the provider said the user is disabled or deleted there; then the user's
    API tokens are revoked as well (each one audited), since nobody is left to hold them."""
    with transaction.atomic():
        teams = sorted(
            Membership.objects.filter(user=user, source=Membership.Source.IDP).values_list(
                "team_id", flat=True
            )
        )
        Membership.objects.filter(user=user, source=Membership.Source.IDP).delete()
        was_admin = user.is_superuser
        roles_before = platform_roles(user)
        user.is_staff = False
        user.is_superuser = False
        user.groups.remove(*Group.objects.filter(name__in=ROLE_GROUPS.values()))
        forget_role_copy(user)
        user.idp_checked_at = None
        user.idp_refresh_by = None
        user.save(update_fields=["is_staff", "is_superuser", "idp_checked_at", "idp_refresh_by"])
        forget_team_copies(user)
        OidcIdentity.objects.filter(user=user).update(refresh_token="")
        ended = _end_sessions(UserSession.objects.filter(user=user))
        revoked = _revoke_all_tokens(user=user, reason=reason) if user_gone else 0
        log.warning(
            "Memberships from the provider of %s lapsed (%s); %d portal session(s) ended, "
            "%d API token(s) revoked.",
            user.get_username(),
            reason,
            ended,
            revoked,
        )
        audit_record(
            actor=None,
            action="auth.groups_lapsed",
            obj=user,
            details={
                "reason": reason,
                "left_teams": teams,
                "admin": was_admin,
                "platform_roles": sorted(roles_before),
                "sessions": ended,
                "user_gone": user_gone,
                "tokens_revoked": revoked,
            },
        )
    return user


def _revoke_all_tokens(*, user: User, reason: str) -> int:
    """Revoke every live API token of ``user`` (the provider disabled or deleted them), each
    recorded as ``token.revoke`` by the platform; how many were revoked."""
    now = timezone.now()
    revoked = 0
    for token in ApiToken.objects.select_for_update().filter(user=user, revoked_at__isnull=True):
        if ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now):
            revoked += 1
            audit_record(
                actor=None,
                action="token.revoke",
                obj=token,
                details={"reason": f"the user is disabled or gone at the provider: {reason}"},
            )
    return revoked


def _free_username(claims: Mapping[str, object], subject: str) -> str:
    """A readable, unique username; the identity itself is issuer + subject, not this."""
    base = str(claims.get("preferred_username") or claims.get("email") or subject)
    base = base.split("@")[0][:140] or "user"
    candidate, n = base, 1
    while User.objects.filter(username=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate
