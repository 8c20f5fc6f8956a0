"""Request templates: the portal's "save as template" and "start from a template"."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_role
from apps.audit.services import audit_record
from apps.workloads import rules
from apps.workloads.models import RequestTemplate

# --- request templates (the portal's "save as template" / "start from a template") -------------


def request_template_save(
    *,
    actor: User,
    name: str,
    kind: str,
    values: dict[str, str],
    team: Team | None = None,
    source_ip: str | None = None,
) -> RequestTemplate:
    """Save a request under a name; saving again under the same name replaces it.

    With ``team`` the template is shared with that team's members (the actor must be one).
    """
    name = name.strip()
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = "Give the template a name."
    if kind not in rules.SUBMITTABLE_KINDS:
        errors["kind"] = f"Unknown kind of workload: {kind!r}."
    if (
        team is not None
        and not platform_may(actor, Act.ACT_FOR_TEAMS)
        and team_role(actor, team.pk) is None
    ):
        errors["team"] = "You can share templates only with your own teams."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        template, created = RequestTemplate.objects.update_or_create(
            owner=actor,
            kind=kind,
            name=name[:100],
            defaults={"values": dict(values), "team": team},
        )
        audit_record(
            actor=actor,
            action="request_template.save",
            obj=template,
            source_ip=source_ip,
            details={"created": created, "shared_with": team.slug if team else None},
        )
    return template


def request_template_delete(
    *, actor: User, template: RequestTemplate, source_ip: str | None = None
) -> None:
    """Delete a template. Its owner and admins may; teammates it is shared with may not."""
    if not (platform_may(actor, Act.ACT_FOR_TEAMS) or template.owner_id == actor.pk):
        raise PermissionDenied("Only the template's owner may delete it.")
    with transaction.atomic():
        audit_record(
            actor=actor, action="request_template.delete", obj=template, source_ip=source_ip
        )
        template.delete()
