from __future__ import annotations

from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db import models, transaction

from apps.audit.changes import diff, snapshot
from apps.audit.models import AuditEvent

M = TypeVar("M", bound=models.Model)


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


def audited_save(
    *, actor: AbstractBaseUser | None, obj: M, action: str, source_ip: str | None
) -> tuple[M, bool, dict[str, dict[str, object]]]:
    """Validate and save a row edited whole (an admin form's); audit ``<action>.create`` or
    ``<action>.update`` with the columns that changed. Returns the row, whether it was
    created, and the changes (nothing is recorded when an edit changed nothing)."""
    obj.full_clean()
    with transaction.atomic():
        created = obj.pk is None
        # Locked, so two admins saving the same row record each their own difference.
        before = (
            {}
            if created
            else snapshot(type(obj)._default_manager.select_for_update().get(pk=obj.pk))
        )
        obj.save()
        after = snapshot(obj)
        changes = diff(before, after) if not created else {}
        if created or changes:
            audit_record(
                actor=actor,
                action=f"{action}.{'create' if created else 'update'}",
                obj=obj,
                source_ip=source_ip,
                details={"after": after} if created else {"changed": changes},
            )
    return obj, created, changes


def audited_delete(
    *, actor: AbstractBaseUser | None, obj: models.Model, action: str, source_ip: str | None
) -> None:
    """Delete a row, recording ``<action>.delete`` with its columns, in one transaction."""
    with transaction.atomic():
        audit_record(
            actor=actor,
            action=f"{action}.delete",
            obj=obj,
            source_ip=source_ip,
            details={"before": snapshot(obj)},
        )
        obj.delete()
