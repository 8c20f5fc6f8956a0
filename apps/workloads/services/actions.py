"""What a person does to a workload: cancel (one or many), suspend and resume a notebook,
delete."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.audit.services import audit_record
from apps.common import taskqueue
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    workload_may_manage,
    workloads_visible_to,
)
from apps.workloads.services.lifecycle import workload_transition


def workload_cancel(
    *, actor: User, workload: Workload, reason: str = "", source_ip: str | None = None
) -> Workload:
    """Cancel a workload that has not finished. Owners, team leads and admins may."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may cancel this workload.")
    if workload.is_sweep:
        # Its state follows its trials' and may have moved since the row was read.
        workload.refresh_from_db(fields=["state", "last_reason"])
    if workload.is_terminal:
        raise ValidationError(f"The workload has already {workload.state}; nothing to cancel.")
    text = reason or f"Cancelled by {actor.get_username()}."
    with transaction.atomic():
        if not workload_transition(
            workload=workload, to_state=core.CANCELLED, reason=text, actor=actor
        ):
            workload.refresh_from_db()
            raise ValidationError(f"The workload changed to {workload.state} meanwhile; try again.")
        audit_record(actor=actor, action="workload.cancel", obj=workload, source_ip=source_ip)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)
        if workload.is_sweep:
            for trial in workload.trials.exclude(state__in=core.TERMINAL_STATES):
                if workload_transition(
                    workload=trial, to_state=core.CANCELLED, reason=text, actor=actor
                ):
                    taskqueue.WORKLOAD_RECONCILE.on_commit(trial.pk)
        taskqueue.SCHEDULING_CYCLE.on_commit()  # its GPUs may start someone else
    return workload


def workload_suspend(*, actor: User, workload: Workload, source_ip: str | None = None) -> Workload:
    """Stop a notebook and keep its storage; it can be resumed later."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may suspend this notebook.")
    if workload.kind != core.KIND_NOTEBOOK:
        raise ValidationError("Only notebooks can be suspended; cancel other workloads instead.")
    if workload.state not in (core.STARTING, core.RUNNING):
        raise ValidationError(f"A notebook that is {workload.state} cannot be suspended.")
    reason = f"Suspended by {actor.get_username()}; your files are kept."
    if not workload_suspend_unchecked(
        workload=workload, reason=reason, actor=actor, source_ip=source_ip
    ):
        raise ValidationError("The notebook changed state meanwhile; try again.")
    return workload


def workload_suspend_idle(*, workload: Workload, reason: str) -> bool:
    """Suspend an idle notebook as the system (idle culling): the same transition as
    ``workload_suspend`` without a person's permission check. False if it is not a running
    notebook or lost a race. Call it inside the caller's transaction to add records to it."""
    if workload.kind != core.KIND_NOTEBOOK or workload.state not in (core.STARTING, core.RUNNING):
        return False
    return workload_suspend_unchecked(
        workload=workload,
        reason=reason,
        actor=None,
        action="workload.idle_suspend",
        details={"reason": reason},
    )


def workload_suspend_unchecked(
    *,
    workload: Workload,
    reason: str,
    actor: User | None,
    action: str = "workload.suspend",
    source_ip: str | None = None,
    details: dict[str, Any] | None = None,
) -> bool:
    """The one suspend: storage kept, objects removed by the next reconcile. The caller has
    checked who may (a scale to zero of an endpoint says so in ``action``)."""
    with transaction.atomic():
        if not workload_transition(
            workload=workload,
            to_state=core.SUSPENDED,
            reason=reason,
            actor=actor,
            expected_from=workload.state,
        ):
            return False
        audit_record(actor=actor, action=action, obj=workload, source_ip=source_ip, details=details)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)
    return True


def workload_resume(*, actor: User, workload: Workload, source_ip: str | None = None) -> Workload:
    """Queue a suspended notebook again; the scheduler admits it when capacity allows."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may resume this notebook.")
    if workload.state != core.SUSPENDED:
        raise ValidationError(
            f"Only a suspended notebook can be resumed; this one is {workload.state}."
        )
    with transaction.atomic():
        reason = f"Resumed by {actor.get_username()}; waiting for a GPU."
        if not workload_transition(
            workload=workload,
            to_state=core.QUEUED,
            reason=reason,
            actor=actor,
            extra={"placement": {}, "cluster": None},
        ):
            raise ValidationError("The notebook changed state meanwhile; try again.")
        audit_record(actor=actor, action="workload.resume", obj=workload, source_ip=source_ip)
    return workload


def workload_delete(*, actor: User, workload: Workload, source_ip: str | None = None) -> None:
    """Remove a workload from every list: cancelled first if it still runs, its Kubernetes
    objects deleted by the reconciler. The row stays for accounting (GPU-hours, chargeback)
    and the audit trail."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may delete this workload.")
    with transaction.atomic():
        if not workload.is_terminal:
            workload_cancel(
                actor=actor, workload=workload, reason=f"Deleted by {actor.get_username()}."
            )
        Workload.objects.filter(pk=workload.pk, deleted_at__isnull=True).update(
            deleted_at=timezone.now()
        )
        audit_record(actor=actor, action="workload.delete", obj=workload, source_ip=source_ip)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)


BULK_CANCEL_MAX = 200


@dataclass(frozen=True)
class BulkCancelResult:
    cancelled: list[str]
    refused: list[str]  # "name: why", for each one the actor may see but not cancel now


def workloads_cancel_many(
    *, actor: User, ids: Iterable[int], source_ip: str | None = None
) -> BulkCancelResult:
    """Cancel each workload through :func:`workload_cancel` (its checks and audit, one at a
    time); ids the actor cannot see are skipped as if they did not exist."""
    wanted = list(dict.fromkeys(ids))[:BULK_CANCEL_MAX]
    cancelled: list[str] = []
    refused: list[str] = []
    for workload in workloads_visible_to(actor).filter(pk__in=wanted).order_by("pk"):
        try:
            workload_cancel(actor=actor, workload=workload, source_ip=source_ip)
        except (PermissionDenied, ValidationError) as exc:
            why = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
            refused.append(f"{workload.name}: {why}")
        else:
            cancelled.append(workload.name)
    return BulkCancelResult(cancelled=cancelled, refused=refused)
