"""GPUs through Dynamic Resource Allocation: the ResourceClaimTemplate of a workload whose
class allocates through DRA, and the pod parts that use it. Pure.

Each replica's pod gets its own ResourceClaim from the workload's one template (a template
makes one claim per pod). The claim asks for the devices :func:`catalog.resources.gpu_claim`
says, and is pinned to what the scheduler placed: a selector on the UUIDs of the GPUs of
every replica's placement (a MIG device by its parent GPU's UUID). The pod's node affinity
already holds it to its own node, whose devices are the only ones its claim can take, so the
upstream allocation is the scheduler's placement device for device (gpupaas pins; it charges
what it placed, and that is what was allocated).
"""

from __future__ import annotations

from typing import Any

from apps.catalog.resources import (
    DRA_DRIVER,
    MIG_DEVICE_CLASS,
    SHARED_CAPACITY,
    DeviceRequest,
    cel_in,
)
from apps.orchestration.manifests.base import Manifest
from apps.orchestration.manifests.spec import WorkloadSpec
from apps.workloads import core as wl

DRA_API_VERSION = "resource.k8s.io/v1"
# The name of the claim in the pod and in its container's resources.
POD_CLAIM = "gpu"


def claim_template_name(spec: WorkloadSpec) -> str:
    return f"{spec.base_name}-gpu"


def _pinned(spec: WorkloadSpec) -> tuple[str, ...]:
    """The GPUs the claims are held to. An endpoint's replicas are not pinned to nodes (its
    Deployment scales and rolls), so neither are its claims."""
    if spec.kind == wl.KIND_INFERENCE:
        return ()
    return tuple(u for p in spec.placement for u in p.gpu_uuids)


def _request(spec: WorkloadSpec, request: DeviceRequest) -> dict[str, Any]:
    selectors = list(request.selectors)
    uuids = _pinned(spec)
    if uuids:
        attribute = "parentUUID" if request.device_class == MIG_DEVICE_CLASS else "uuid"
        selectors.append(cel_in(attribute, uuids))
    exactly: dict[str, Any] = {
        "deviceClassName": request.device_class,
        "allocationMode": "ExactCount",
        "count": request.count,
    }
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if request.capacity_mib is not None:
        exactly["capacity"] = {"requests": {SHARED_CAPACITY: f"{request.capacity_mib}Mi"}}
    return {"name": request.name, "exactly": exactly}


def gpu_claim_template(spec: WorkloadSpec) -> Manifest | None:
    """The workload's ResourceClaimTemplate, or None when its GPUs come from the device plugin."""
    if spec.gpu_claim is None:
        return None
    requests = [_request(spec, r) for r in spec.gpu_claim.requests]
    devices: dict[str, Any] = {"requests": requests}
    if len(requests) > 1:
        # Whole shared GPUs and the part of one more: never the same GPU twice.
        devices["constraints"] = [
            {"requests": [r["name"] for r in requests], "distinctAttribute": f"{DRA_DRIVER}/uuid"}
        ]
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": claim_template_name(spec),
            "namespace": spec.namespace,
            "labels": spec.labels,
        },
        "spec": {"metadata": {"labels": spec.labels}, "spec": {"devices": devices}},
    }


def pod_claims(spec: WorkloadSpec) -> list[dict[str, Any]]:
    """The pod's resourceClaims: one from the workload's template (none without DRA)."""
    if spec.gpu_claim is None:
        return []
    return [{"name": POD_CLAIM, "resourceClaimTemplateName": claim_template_name(spec)}]


def with_claim_template(spec: WorkloadSpec, manifests: list[Manifest]) -> list[Manifest]:
    """The workload's objects, its claim template first (the pods that name it come after)."""
    template = gpu_claim_template(spec)
    return [template, *manifests] if template else manifests
