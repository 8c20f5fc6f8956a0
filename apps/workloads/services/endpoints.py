"""An inference endpoint's settings as its workload records them, and what the status pass
records of a rollout. The endpoint services themselves are apps.serving's."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.services import audit_record
from apps.catalog.models import Image
from apps.common import taskqueue
from apps.workloads.models import Workload, WorkloadEvent

# --- inference endpoints: what the status pass records -------------------------------------
# The endpoint services (scaling, waking, rollouts, keys) are apps.serving's; the status pass in
# apps.orchestration, below serving, records a rollout's progress through this one.


def endpoint_settings(workload: Workload) -> dict[str, Any]:
    """An endpoint's settings as its workload records them (a copy to change)."""
    return dict((workload.params or {}).get("endpoint") or {})


def endpoint_settings_save(workload: Workload, endpoint: dict[str, Any], **changes: Any) -> None:
    """Record an endpoint's settings and any other of its workload's fields, row and object."""
    params = dict(workload.params or {})
    params["endpoint"] = endpoint
    Workload.objects.filter(pk=workload.pk).update(params=params, **changes)
    workload.params = params
    for key, value in changes.items():
        setattr(workload, key, value)


# What a rollout changes (and a rollback puts back) besides the image and the environment.
ROLLOUT_FIELDS = (
    "model_path",
    "model_uri",
    "model_secret",
    "model_secret_k8s",
    "model_secret_keys",
)


def endpoint_rollout_observed(
    *, workload: Workload, state: str, message: str, updated: int, ready: int
) -> str | None:
    """Record what the cluster says of a rollout in progress: still progressing (with how many
    replicas run the new revision), complete, or failed — then the previous revision is put
    back by itself. Returns the rollout's new state, or None if nothing changed."""
    with transaction.atomic():
        locked = Workload.objects.select_for_update().filter(pk=workload.pk).first()
        if locked is None:
            return None
        endpoint = endpoint_settings(locked)
        rollout = dict(endpoint.get("rollout") or {})
        if rollout.get("state") != "progressing":
            return None
        rollout.update(updated=updated, ready=ready, message=message[:300])
        if state == "progressing":
            if rollout != endpoint.get("rollout"):
                endpoint_settings_save(locked, {**endpoint, "rollout": rollout})
            return None
        if state == "complete":
            rollout["state"] = "complete"
            endpoint["rollout"] = rollout
            endpoint_settings_save(locked, endpoint)
            WorkloadEvent.objects.create(
                workload=locked,
                from_state=locked.state,
                to_state=locked.state,
                reason=f"Revision {rollout.get('revision')} rolled out: {message}"[:500],
            )
            return "complete"
        previous = dict(endpoint.get("previous") or {})
        revision = int(endpoint.get("revision") or 1) + 1
        image_id = previous.get("image")
        image = (
            Image.objects.filter(pk=image_id).first() if isinstance(image_id, int) else None
        ) or locked.image
        rollout.update(state="rolled back", finished_at=timezone.now().isoformat())
        restored = {
            **endpoint,
            **{k: previous.get(k) for k in ROLLOUT_FIELDS if k in previous},
            "pod_annotations": previous.get("pod_annotations") or {},
            "revision": revision,
            "rollout": rollout,
        }
        endpoint_settings_save(locked, restored, image=image, env=previous.get("env") or {})
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            reason=(
                f"Revision {rollout.get('revision')} did not become ready ({message}); rolled "
                f"back to the previous image, model and environment as revision {revision}."
            )[:500],
        )
        audit_record(
            actor=None, action="endpoint.rollback", obj=locked, details={"revision": revision}
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
        return "rolled back"
