"""Inference endpoints' own writes: scaling (by a person or the scaling loop), waking one
scaled to zero, and rolling out a new image, model or environment without downtime. An
endpoint is a workload of kind inference: it is submitted, admitted and charged like any
request (``apps.workloads.services.workload_submit``); what it does besides lives here. Its
keys and the ingress's call check: ``apps.serving.access``; the scaling loop:
``apps.serving.autoscaling``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.audit.services import audit_record
from apps.catalog.models import Image
from apps.common import taskqueue
from apps.workloads import core, rules
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.selectors import workload_may_manage
from apps.workloads.services import (
    ROLLOUT_FIELDS,
    dataset_names,
    endpoint_settings,
    endpoint_settings_save,
    workload_request_check,
    workload_suspend_unchecked,
    workload_transition,
)


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def endpoint_scale(
    *,
    actor: User | None,
    workload: Workload,
    replicas: Any,
    reason: str = "",
    source_ip: str | None = None,
) -> Workload:
    """Ask an endpoint to run ``replicas`` (its owner, a lead or an admin; ``actor`` None: the
    scaling loop). Fewer: the extra replicas go now. More: each added replica waits in the
    queue like any request and is admitted on the team's guarantee (the endpoint says why it
    waits). Zero, where the endpoint may scale to zero: it is scaled to zero (suspended) and
    the next call or a wake brings it back."""
    if actor is not None and not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may scale this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError({"replicas": "Only inference endpoints are scaled."})
    with transaction.atomic():
        # The scheduler's scale-ups lock the row too: a cycle and a scale-down take turns.
        locked = Workload.objects.select_for_update().get(pk=workload.pk)
        endpoint = endpoint_settings(locked)
        low = int(endpoint.get("min_replicas") or 0)
        high = int(endpoint.get("max_replicas") or 1)
        if not _whole_number(replicas) or not low <= replicas <= high:
            raise ValidationError(
                {"replicas": f"This endpoint runs between {low} and {high} replicas."}
            )
        if locked.state == core.SUSPENDED and replicas > 0:
            endpoint_settings_save(locked, {**endpoint, "target_replicas": replicas})
            endpoint_wake(actor=actor, workload=locked, source_ip=source_ip)
            return locked
        if locked.state not in core.ACTIVE_STATES:
            raise ValidationError(
                {"replicas": f"An endpoint that is {locked.state} cannot be scaled."}
            )
        who = actor.get_username() if actor else "the scaling loop"
        text = reason or f"Scaled to {replicas} replicas by {who}."
        if replicas == 0:
            endpoint_settings_save(locked, {**endpoint, "target_replicas": 0, "scale_waiting": ""})
            workload_suspend_unchecked(
                workload=locked,
                reason=f"Scaled to zero: {text}",
                actor=actor,
                action="endpoint.scale",
                source_ip=source_ip,
                details={"replicas": 0},
            )
            taskqueue.SCHEDULING_CYCLE.on_commit()
            return locked
        endpoint.update(target_replicas=replicas, scale_waiting="")
        changes: dict[str, Any] = {}
        if replicas < locked.replicas:
            placement = dict(locked.placement or {})
            placement["replicas"] = list(placement.get("replicas") or [])[:replicas]
            changes = {"replicas": replicas, "placement": placement}
        elif replicas > locked.replicas:
            endpoint["scale_requested_at"] = timezone.now().isoformat()
        endpoint_settings_save(locked, endpoint, **changes)
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            reason=text[:500],
            actor=actor,
        )
        audit_record(
            actor=actor,
            action="endpoint.scale",
            obj=locked,
            source_ip=source_ip,
            details={"replicas": replicas},
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
        taskqueue.SCHEDULING_CYCLE.on_commit()
    workload.refresh_from_db()
    return workload


def endpoint_wake(*, actor: User | None, workload: Workload, source_ip: str | None = None) -> bool:
    """Queue an endpoint scaled to zero again (a call came, or its owner asked): its first
    replica is admitted like any request, the rest follow up to its target. False if it is
    not scaled to zero (any more)."""
    if actor is not None and not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may wake this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        return False
    with transaction.atomic():
        endpoint = endpoint_settings(workload)
        target = max(
            1, int(endpoint.get("target_replicas") or 0), int(endpoint.get("min_replicas") or 0)
        )
        woke = workload_transition(
            workload=workload,
            to_state=core.QUEUED,
            reason="Waking up: a call came in."
            if actor is None
            else f"Woken by {actor.get_username()}.",
            actor=actor,
            expected_from=core.SUSPENDED,
            extra={"placement": {}, "cluster": None, "replicas": 1},
        )
        if not woke:
            return False
        endpoint_settings_save(workload, {**endpoint, "target_replicas": target})
        audit_record(actor=actor, action="endpoint.wake", obj=workload, source_ip=source_ip)
        taskqueue.SCHEDULING_CYCLE.on_commit()
    return True


def endpoint_update(
    *,
    actor: User,
    workload: Workload,
    image: Image | None = None,
    env: dict[str, Any] | None = None,
    model_path: str | None = None,
    model_uri: str | None = None,
    model_secret: str | None = None,
    source_ip: str | None = None,
) -> Workload:
    """Roll out a new image, model or environment without downtime: the Deployment adds a
    replica of the new revision before it takes an old one away, and the status pass rolls
    back to the previous revision by itself when the new replicas do not become ready in
    ENDPOINT_PROGRESS_DEADLINE_SECONDS. The request rules apply again, as at submit."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may update this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError("Only inference endpoints are updated in place.")
    if workload.state not in core.ACTIVE_STATES and workload.state != core.SUSPENDED:
        raise ValidationError(f"An endpoint that is {workload.state} cannot be updated.")
    endpoint = endpoint_settings(workload)
    asked = dict(endpoint)
    if model_path is not None or model_uri is not None:
        asked["model_path"], asked["model_uri"] = model_path or "", model_uri or ""
        asked["model_secret"] = model_secret or ""
    elif model_secret is not None:
        asked["model_secret"] = model_secret
    new_image = image or workload.image
    new_env = dict(workload.env or {}) if env is None else env
    request = rules.WorkloadRequest(
        kind=workload.kind,
        name=workload.name,
        gpu_milli=workload.gpu_milli,
        priority_class=workload.priority_class,
        command=tuple(workload.command or ()),
        args=tuple(workload.args or ()),
        env=new_env,
        secrets=tuple(rules.SecretRef.of(ref) for ref in workload.secrets or ()),
        datasets=dataset_names(workload.datasets),
        endpoint=rules.EndpointRequest.of(asked),
    )
    charge = workload_request_check(
        actor=actor,
        team=workload.team,
        gpu_class=workload.gpu_class,
        image=new_image,
        request=request,
    )
    assert charge.endpoint is not None
    with transaction.atomic():
        locked = Workload.objects.select_for_update().get(pk=workload.pk)
        current = endpoint_settings(locked)
        revision = int(current.get("revision") or 1) + 1
        previous = {
            "revision": current.get("revision") or 1,
            "image": locked.image_id,
            "env": dict(locked.env or {}),
            "pod_annotations": current.get("pod_annotations") or {},
            **{k: current.get(k) for k in ROLLOUT_FIELDS},
        }
        updated = {
            **current,
            **{k: charge.endpoint[k] for k in ROLLOUT_FIELDS},
            "revision": revision,
            "previous": previous,
            "rollout": {
                "revision": revision,
                "state": "progressing",
                "started_at": timezone.now().isoformat(),
                "message": "Rolling out: new replicas start before old ones stop.",
            },
        }
        endpoint_settings_save(locked, updated, image=new_image, env=new_env)
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            actor=actor,
            reason=f"Rolling out revision {revision} by {actor.get_username()}.",
        )
        audit_record(
            actor=actor,
            action="endpoint.update",
            obj=locked,
            source_ip=source_ip,
            details={"revision": revision, "image": new_image.name},
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
    workload.refresh_from_db()
    return workload
