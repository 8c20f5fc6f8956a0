"""Teams and their memberships: create, rename, delete; a member's role set or removed (a
membership the identity provider manages is the provider's)."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from apps.accounts import core
from apps.accounts.models import Membership, Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import (
    forget_team_copies,
    is_team_lead,
    platform_may,
)
from apps.audit.services import audit_record
from apps.common import taskqueue

log = logging.getLogger(__name__)


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


PROVIDER_OWNS_MEMBERSHIP = (
    "This membership comes from the identity provider's groups; change it there, or ask a "
    "platform admin."
)


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
        if actor is not None and not platform_may(actor, Act.GOVERN_TEAMS):
            # A lead must not be able to make their own access outlive the provider's group
            # (setting it makes it manual), nor take over a membership the provider owns.
            if actor.pk == user.pk:
                raise PermissionDenied(
                    "You cannot change your own membership; ask another lead or a platform admin."
                )
            if previous is not None and previous["source"] == Membership.Source.IDP:
                raise PermissionDenied(PROVIDER_OWNS_MEMBERSHIP)
        # A membership set by hand is manual: sign-ins no longer change or remove it.
        membership, created = Membership.objects.update_or_create(
            user=user, team=team, defaults={"role": role, "source": Membership.Source.MANUAL}
        )
        forget_team_copies(user)
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
    if (
        actor is not None
        and not platform_may(actor, Act.GOVERN_TEAMS)
        and membership.source == Membership.Source.IDP
    ):
        # The provider's groups own it: the next sign-in would bring it back anyway, and a lead
        # may not change it either (membership_set).
        raise PermissionDenied(PROVIDER_OWNS_MEMBERSHIP)
    with transaction.atomic():
        audit_record(actor=actor, action="membership.remove", obj=membership, source_ip=source_ip)
        membership.delete()
