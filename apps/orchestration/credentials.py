"""Team and personal secrets: written to the cluster at once, never kept in the database.

A secret's values go from the request straight to a Kubernetes Secret in the team namespace
on every enabled cluster, inside the transaction that records its metadata: if a cluster
cannot take it, nothing is recorded and the caller hears so (values are never queued through
the broker to try later). Deleting removes the row at once and the Secrets through a task
that retries (it carries names only).

Who may: team secrets are written by the team's leads and admins and used by every member;
personal secrets are written and used by their owner only.
"""

from __future__ import annotations

import logging
import secrets as random
from collections.abc import Mapping

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_role
from apps.audit.services import audit_record
from apps.common import taskqueue
from apps.credentials import core
from apps.credentials.models import Secret
from apps.orchestration import manifests as m
from apps.orchestration.clusters import kube_for
from apps.orchestration.errors import ClusterError
from apps.orchestration.kube import ForeignObjectError
from apps.orchestration.selectors import enabled_clusters

log = logging.getLogger(__name__)

NO_CLUSTER = "No cluster is registered to keep the secret in; ask a platform admin."


def _may_write(actor: User, team: Team, *, personal: bool) -> None:
    if team_role(actor, team.pk) is None and not platform_may(actor, Act.ACT_FOR_TEAMS):
        raise PermissionDenied("You are not a member of this team.")
    if not personal and not is_team_lead(actor, team.pk):
        raise PermissionDenied(
            "Only the team's leads and admins may write team secrets; create a personal one."
        )


def _may_change(actor: User, secret: Secret) -> None:
    if secret.owner_id is not None:
        if secret.owner_id != actor.pk:
            raise PermissionDenied("Only its owner may change a personal secret.")
        return
    _may_write(actor, secret.team, personal=False)


def _write(secret: Secret, data: Mapping[str, str]) -> None:
    """The values to the Secret on every enabled cluster; raises what the cluster said."""
    clusters = list(enabled_clusters())
    if not clusters:
        raise ValidationError(NO_CLUSTER)
    manifest = m.credential_secret_manifest(
        namespace=secret.team.namespace,
        name=secret.k8s_name,
        team_slug=secret.team.slug,
        personal=secret.owner_id is not None,
        data=data,
    )
    for cluster in clusters:
        kube_for(cluster).put(manifest)


def secret_create(
    *,
    actor: User,
    team: Team,
    name: str,
    data: Mapping[str, str],
    personal: bool = False,
    source_ip: str | None = None,
) -> Secret:
    """A new team (or, with ``personal``, the actor's own) secret with these keys and values.

    Field → message (ValidationError) for a bad name or values, or a name already taken in the
    scope; ClusterError when a cluster cannot take it (then nothing is recorded)."""
    _may_write(actor, team, personal=personal)
    errors = core.problems(name=name, data=data)
    owner = actor if personal else None
    if "name" not in errors and Secret.objects.filter(team=team, owner=owner, name=name).exists():
        errors["name"] = (
            f"You already have a personal secret {name}; rotate it to change its value."
            if personal
            else f"{team.slug} already has a secret {name}; rotate it to change its value."
        )
    if errors:
        raise ValidationError(errors)
    k8s_name = f"{core.K8S_NAME_PREFIX}{random.token_hex(6)}"
    try:
        with transaction.atomic():
            now = timezone.now()
            secret = Secret.objects.create(
                team=team,
                owner=owner,
                name=name,
                keys=sorted(data),
                k8s_name=k8s_name,
                created_by=actor,
                created_at=now,
                updated_at=now,
            )
            audit_record(
                actor=actor,
                action="secret.create",
                obj=secret,
                source_ip=source_ip,
                details={
                    "team": team.slug,
                    "name": name,
                    "scope": secret.scope,
                    "keys": secret.keys,
                },
            )
            _write(secret, data)
    except IntegrityError as exc:  # the same name created meanwhile
        raise ValidationError({"name": f"A secret {name} was created meanwhile."}) from exc
    except ClusterError:
        # Some cluster may hold it already: remove it there (names only go through the queue).
        taskqueue.CREDENTIAL_REMOVE.send(team.namespace, k8s_name)
        raise
    return secret


def secret_rotate(
    *, actor: User, secret: Secret, data: Mapping[str, str], source_ip: str | None = None
) -> Secret:
    """New values (and keys) for a secret; workloads that start from now on see them."""
    _may_change(actor, secret)
    problem = core.data_problem(data)
    if problem:
        raise ValidationError({"value": problem})
    with transaction.atomic():
        # Two rotations at once: one waits for the other, so the row says the last one's keys.
        locked = Secret.objects.select_for_update().select_related("team").get(pk=secret.pk)
        locked.keys = sorted(data)
        locked.updated_at = timezone.now()
        locked.save(update_fields=["keys", "updated_at"])
        audit_record(
            actor=actor,
            action="secret.rotate",
            obj=locked,
            source_ip=source_ip,
            details={"team": locked.team.slug, "name": locked.name, "keys": locked.keys},
        )
        _write(locked, data)
    return locked


def secret_delete(*, actor: User, secret: Secret, source_ip: str | None = None) -> None:
    """Forget the secret and remove its Secrets from the clusters. Admins may delete any team
    secret; a personal one only its owner (or an admin, for someone who left)."""
    if not (platform_may(actor, Act.ACT_FOR_TEAMS) and secret.owner_id is not None):
        _may_change(actor, secret)
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="secret.delete",
            obj=secret,
            source_ip=source_ip,
            details={"team": secret.team.slug, "name": secret.name, "scope": secret.scope},
        )
        namespace, k8s_name = secret.team.namespace, secret.k8s_name
        secret.delete()
        taskqueue.CREDENTIAL_REMOVE.on_commit(namespace, k8s_name)


def credential_remove(*, namespace: str, k8s_name: str) -> int:
    """Delete a credential's Secret on every enabled cluster; how many were there. Leaves an
    object that is not ours alone."""
    removed = 0
    for cluster in enabled_clusters():
        try:
            if kube_for(cluster).delete("v1", "Secret", k8s_name, namespace):
                removed += 1
        except ForeignObjectError as exc:
            log.warning("%s", exc)
    return removed
