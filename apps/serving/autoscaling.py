"""The scaling loop: for each serving endpoint, read its load from Prometheus, ask the pure
core how many replicas it should run, record the sample, and scale through the one scaling
service (scale-ups wait in the scheduler's queue like any request)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.orchestration.names import stored_name
from apps.serving import core
from apps.serving.models import EndpointSample, ScalerState
from apps.serving.services import endpoint_scale
from apps.telemetry.prom import PrometheusClient, PrometheusUnavailable, default_client
from apps.workloads import core as wl
from apps.workloads.models import Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reading:
    requests_per_second: float | None = None
    latency_p95_seconds: float | None = None
    gpu_utilisation: float | None = None


def _query(template: str, workload: Workload) -> str:
    """The query for one endpoint: its namespace, and its Service as stored when it was made."""
    return template.replace("$namespace", workload.team.namespace).replace(
        "$service", stored_name(workload, "Service")
    )


def _scalar(client: PrometheusClient, promql: str) -> float | None:
    if not promql:  # no query for this signal (a gateway whose metrics are not known)
        return None
    rows = client.query(promql)
    for row in rows:
        value = row.get("value")
        if isinstance(value, list | tuple) and len(value) == 2:
            try:
                number = float(value[1])
            except (TypeError, ValueError):
                continue
            if number == number:  # not NaN (no samples in the window)
                return number
    return None


def prometheus_reading(client: PrometheusClient, workload: Workload) -> Reading:
    """The endpoint's request rate and p95 latency (the ingress's or the server's own
    metrics, as the settings' queries say) and its replicas' mean GPU utilisation."""
    return Reading(
        requests_per_second=_scalar(client, _query(settings.SERVING_RPS_QUERY, workload)),
        latency_p95_seconds=_scalar(client, _query(settings.SERVING_LATENCY_QUERY, workload)),
        gpu_utilisation=_scalar(client, _query(settings.SERVING_GPU_QUERY, workload)),
    )


def policy_of(workload: Workload) -> core.Policy:
    endpoint = (workload.params or {}).get("endpoint") or {}
    idle = endpoint.get("idle_minutes")
    cooldown = float(settings.SERVING_SCALE_COOLDOWN_SECONDS)
    return core.Policy(
        min_replicas=int(endpoint.get("min_replicas") or 0),
        max_replicas=int(endpoint.get("max_replicas") or 1),
        metric=str(endpoint.get("scale_metric") or core.METRIC_RPS),
        target=float(endpoint.get("scale_target") or 10.0),
        idle_seconds=float(idle) * 60 if isinstance(idle, int) else None,
        cooldown_up=cooldown / 3,
        cooldown_down=cooldown,
    )


@dataclass
class PassResult:
    endpoints: int = 0
    scaled: list[tuple[int, int]] | None = None
    errors: list[str] | None = None


def autoscale_pass(
    *, now: datetime | None = None, read: Callable[[Workload], Reading] | None = None
) -> PassResult:
    """One pass over the running endpoints. ``read`` gives an endpoint's load (default: from
    Prometheus); a reading that fails leaves that endpoint as it is."""
    now = now or timezone.now()
    result = PassResult(scaled=[], errors=[])
    client: PrometheusClient | None = None
    if read is None:
        client = default_client()

        def read(w: Workload) -> Reading:
            assert client is not None
            return prometheus_reading(client, w)

    try:
        endpoints = Workload.objects.filter(
            kind=wl.KIND_INFERENCE, state=wl.RUNNING, deleted_at__isnull=True
        ).select_related("team", "owner")
        for workload in endpoints:
            result.endpoints += 1
            try:
                reading = read(workload)
            except PrometheusUnavailable as exc:
                assert result.errors is not None
                result.errors.append(f"#{workload.pk}: {exc}")
                reading = Reading()
            changed = endpoint_autoscale(workload=workload, reading=reading, now=now)
            if changed is not None:
                assert result.scaled is not None
                result.scaled.append((workload.pk, changed))
    finally:
        if client is not None:
            client.close()
    return result


def endpoint_autoscale(*, workload: Workload, reading: Reading, now: datetime) -> int | None:
    """Decide and act for one endpoint; returns the replicas it was scaled to, or None."""
    policy = policy_of(workload)
    endpoint = (workload.params or {}).get("endpoint") or {}
    target = int(endpoint.get("target_replicas") or workload.replicas)
    stored = ScalerState.objects.filter(workload=workload).first()
    state = core.State(
        replicas=target,
        last_change_at=stored.last_change_at if stored else None,
        idle_since=stored.idle_since if stored else None,
        recent=tuple((float(t), int(d)) for t, d in (stored.recent if stored else [])),
    )
    value = (
        reading.gpu_utilisation if policy.metric == core.METRIC_GPU else reading.requests_per_second
    )
    decision = core.decide(
        policy,
        state,
        core.Load(value=value, requests=reading.requests_per_second),
        now.timestamp(),
    )
    with transaction.atomic():
        ScalerState.objects.update_or_create(
            workload=workload,
            defaults={
                "last_change_at": decision.state.last_change_at,
                "idle_since": decision.state.idle_since,
                "recent": [list(r) for r in decision.state.recent],
            },
        )
        EndpointSample.objects.create(
            workload=workload,
            at=now,
            replicas=workload.replicas,
            target=decision.replicas,
            requests_per_second=reading.requests_per_second,
            latency_p95_seconds=reading.latency_p95_seconds,
            gpu_utilisation=reading.gpu_utilisation,
            decision=decision.reason[:300],
        )
    if not decision.changed or decision.replicas == target:
        return None
    try:
        endpoint_scale(
            actor=None,
            workload=workload,
            replicas=decision.replicas,
            reason=f"Autoscaled: {decision.reason}.",
        )
    except ValidationError as exc:
        log.warning("endpoint %s: not scaled: %s", workload.pk, exc)
        return None
    return decision.replicas


def endpoint_samples_purge(*, before: datetime) -> int:
    deleted, _ = EndpointSample.objects.filter(at__lt=before).delete()
    return deleted
