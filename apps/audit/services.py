from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

from apps.audit.models import AuditEvent


def audit_record(
    *,
    actor: AbstractBaseUser | None,
    action: str,
    obj: models.Model | None = None,
    source_ip: str | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit event. Call it inside the transaction of the change it describes."""
    return AuditEvent.objects.create(
        actor_id=actor.pk if actor is not None and actor.pk else None,
        actor_repr=actor.get_username() if actor is not None and actor.pk else "system",
        action=action,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None and obj.pk is not None else "",
        object_repr=str(obj)[:200] if obj is not None else "",
        source_ip=source_ip or None,
        details=details or {},
    )
