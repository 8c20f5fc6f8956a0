"""Register and remove a team's datasets: leads and admins only, each write audited.

Registering records where the data is; it creates nothing in the cluster. A claim dataset
names a volume claim the team namespace already holds (its pods fail to start otherwise, and
say so in their events); removing a dataset leaves the claim and the data alone, and
workloads that named it keep what they recorded at submit.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_role
from apps.audit.services import audit_record
from apps.credentials.models import Secret
from apps.datasets import core
from apps.datasets.models import Dataset


def _may_write(actor: User, team: Team) -> None:
    if team_role(actor, team.pk) is None and not platform_may(actor, Act.ACT_FOR_TEAMS):
        raise PermissionDenied("You are not a member of this team.")
    if not is_team_lead(actor, team.pk):
        raise PermissionDenied("Only the team's leads and admins may register or remove datasets.")


def dataset_register(
    *,
    actor: User,
    team: Team,
    name: str,
    kind: str,
    claim: str = "",
    uri: str = "",
    secret: str = "",
    source_ip: str | None = None,
) -> Dataset:
    """A new dataset of the team. ``secret`` names a team secret (object-store datasets only).
    Field → message (ValidationError) for bad values, a name taken, or an unknown secret."""
    _may_write(actor, team)
    errors = core.problems(name=name, kind=kind, claim=claim, uri=uri)
    secret_row = None
    if secret:
        if kind != core.KIND_OBJECT:
            errors["secret"] = "Only an object-store dataset takes a secret."  # noqa: S105
        else:
            secret_row = Secret.objects.filter(team=team, owner__isnull=True, name=secret).first()
            if secret_row is None:
                errors["secret"] = (
                    f"No team secret named “{secret}” in {team.slug}; create it first."
                )
    if "name" not in errors and Dataset.objects.filter(team=team, name=name).exists():
        errors["name"] = f"{team.slug} already has a dataset {name}."
    if errors:
        raise ValidationError(errors)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                team=team,
                name=name,
                kind=kind,
                claim=claim if kind == core.KIND_CLAIM else "",
                uri=uri if kind == core.KIND_OBJECT else "",
                secret=secret_row,
                registered_by=actor,
            )
            audit_record(
                actor=actor,
                action="dataset.register",
                obj=dataset,
                source_ip=source_ip,
                details={
                    "team": team.slug,
                    "name": name,
                    "kind": kind,
                    "claim": dataset.claim,
                    "uri": dataset.uri,
                    "secret": secret,
                },
            )
    except IntegrityError as exc:  # the same name registered meanwhile
        raise ValidationError({"name": f"A dataset {name} was registered meanwhile."}) from exc
    return dataset


def dataset_remove(*, actor: User, dataset: Dataset, source_ip: str | None = None) -> None:
    """Forget the dataset: new requests can no longer name it. The data is left alone."""
    _may_write(actor, dataset.team)
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="dataset.remove",
            obj=dataset,
            source_ip=source_ip,
            details={"team": dataset.team.slug, "name": dataset.name, "kind": dataset.kind},
        )
        dataset.delete()
