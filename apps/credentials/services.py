"""Per-endpoint API keys: created (shown once) and revoked. Who may is decided by the caller
(the endpoint's owner, a lead of its team or an admin: ``apps.workloads.services``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.audit.services import audit_record
from apps.credentials import core
from apps.credentials.models import EndpointKey

# How stale a key's "last used" may get before a call writes it again: one write a minute,
# not one per call.
LAST_USED_RESOLUTION_SECONDS = 60


@dataclass(frozen=True)
class CreatedKey:
    key: EndpointKey
    plaintext: str  # shown once


def endpoint_key_create(
    *, actor: User, team: Team, endpoint_id: int, name: str, source_ip: str | None = None
) -> CreatedKey:
    problem = core.endpoint_key_name_problem(name)
    if problem:
        raise ValidationError({"name": problem})
    material = core.endpoint_key_generate()
    with transaction.atomic():
        key = EndpointKey.objects.create(
            team=team,
            endpoint_id=endpoint_id,
            name=name.strip(),
            lookup=material.lookup,
            digest=material.digest,
            created_by=actor,
        )
        audit_record(
            actor=actor,
            action="endpoint_key.create",
            obj=key,
            source_ip=source_ip,
            details={"endpoint": endpoint_id, "name": key.name},
        )
    return CreatedKey(key, material.plaintext)


def endpoint_key_revoke(*, actor: User, key: EndpointKey, source_ip: str | None = None) -> bool:
    """Revoke a key at once (calls with it are refused from now on). False: already revoked."""
    with transaction.atomic():
        revoked = EndpointKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            audit_record(
                actor=actor,
                action="endpoint_key.revoke",
                obj=key,
                source_ip=source_ip,
                details={"endpoint": key.endpoint_id, "name": key.name},
            )
    key.refresh_from_db()
    return bool(revoked)


def endpoint_key_used(*, key: EndpointKey) -> None:
    """Note that a call used the key (at most once a minute per key)."""
    now = timezone.now()
    last = key.last_used_at
    if last is None or (now - last).total_seconds() >= LAST_USED_RESOLUTION_SECONDS:
        EndpointKey.objects.filter(pk=key.pk).update(last_used_at=now)
