"""What an endpoint's page, the API and the CLI show of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from apps.orchestration import manifests as m
from apps.orchestration.names import stored_name
from apps.serving import keys
from apps.serving.models import EndpointKey, EndpointSample
from apps.workloads import core as wl
from apps.workloads.models import Workload

HISTORY_SAMPLES = 120


@dataclass(frozen=True)
class EndpointOverview:
    workload: Workload
    url: str  # through the ingress; empty: served only inside the cluster
    service: str  # the in-cluster address (empty while the endpoint has no Service)
    replicas: int  # held (admitted) now
    target: int  # asked for (by its owner or the scaling loop)
    min_replicas: int
    max_replicas: int
    status: str  # one line: running, waiting for a replica, scaled to zero, rolling out …
    scale_waiting: str
    rollout: dict[str, Any]
    settings: dict[str, Any]
    keys: list[EndpointKey] = field(default_factory=list)
    samples: list[EndpointSample] = field(default_factory=list)
    cost_per_hour: Decimal = Decimal(0)

    @property
    def latest(self) -> EndpointSample | None:
        return self.samples[-1] if self.samples else None


def endpoint_url(workload: Workload) -> str:
    host = settings.ENDPOINT_HOST.rstrip("/")
    if not host:
        return ""
    if "://" not in host:
        host = f"https://{host}"
    return f"{host}{m.endpoint_path(workload.team.namespace, workload.pk)}"


def endpoint_status(workload: Workload, endpoint: dict[str, Any]) -> str:
    rollout = endpoint.get("rollout") or {}
    target = int(endpoint.get("target_replicas") or 0)
    if workload.state == wl.SUSPENDED:
        return "Scaled to zero: the next call (or Wake) starts it again; calls meanwhile get 503."
    if workload.is_terminal:
        return f"Ended ({workload.state}): {workload.last_reason}"
    if workload.state in wl.WAITING_STATES:
        return f"Waiting for its first replica: {workload.last_reason}"
    parts = [workload.last_reason or workload.state]
    if rollout.get("state") == "progressing":
        parts.append(
            f"rolling out revision {rollout.get('revision')}: {rollout.get('message', '')}"
        )
    elif rollout.get("state") == "rolled back":
        parts.append(
            f"revision {rollout.get('revision')} was rolled back: {rollout.get('message')}"
        )
    if target > workload.replicas and endpoint.get("scale_waiting"):
        parts.append(
            f"{target - workload.replicas} more replica(s) wait: {endpoint['scale_waiting']}"
        )
    return "; ".join(p for p in parts if p)


def service_address(workload: Workload) -> str:
    """The endpoint's in-cluster address: its Service as stored when it was created."""
    name = stored_name(workload, "Service")
    if not name:
        return ""
    return f"{name}.{workload.team.namespace}.svc:{m.ENDPOINT_SERVICE_PORT}"


def endpoint_overview(workload: Workload, *, history: int = HISTORY_SAMPLES) -> EndpointOverview:
    endpoint = dict((workload.params or {}).get("endpoint") or {})
    samples = list(
        EndpointSample.objects.filter(workload=workload).order_by("-at", "-id")[:history]
    )[::-1]
    held = 0 if workload.state not in wl.ACTIVE_STATES else workload.replicas
    cost = workload.gpu_class.hourly_cost * Decimal(workload.charged_milli * held) / 1000
    return EndpointOverview(
        workload=workload,
        url=endpoint_url(workload),
        service=service_address(workload),
        replicas=held,
        target=int(endpoint.get("target_replicas") or 0),
        min_replicas=int(endpoint.get("min_replicas") or 0),
        max_replicas=int(endpoint.get("max_replicas") or 1),
        status=endpoint_status(workload, endpoint),
        scale_waiting=str(endpoint.get("scale_waiting") or ""),
        rollout=dict(endpoint.get("rollout") or {}),
        settings={
            k: endpoint.get(k)
            for k in (
                "port",
                "health_path",
                "model_path",
                "model_uri",
                "model_secret",
                "scale_metric",
                "scale_target",
                "idle_minutes",
                "revision",
            )
        },
        keys=endpoint_keys(endpoint_id=workload.pk),
        samples=samples,
        cost_per_hour=cost.quantize(Decimal("0.01")),
    )


def endpoint_key_matches(*, endpoint_id: int, plaintext: str) -> EndpointKey | None:
    """The live key of this endpoint a call presents, or None (no key, a wrong, revoked or
    other endpoint's key)."""
    if not plaintext:
        return None
    return EndpointKey.objects.filter(
        endpoint_id=endpoint_id,
        digest=keys.endpoint_key_digest(plaintext),
        revoked_at__isnull=True,
    ).first()


def endpoint_keys(*, endpoint_id: int) -> list[EndpointKey]:
    return list(EndpointKey.objects.filter(endpoint_id=endpoint_id).select_related("created_by"))
