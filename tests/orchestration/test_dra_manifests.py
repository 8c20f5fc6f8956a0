"""GPUs through Dynamic Resource Allocation: a DRA class's replicas claim devices from a
ResourceClaimTemplate pinned to the scheduler's placement, and are charged what was allocated."""

from __future__ import annotations

from typing import Any

from apps.catalog.core import GpuClassSpec
from apps.catalog.resources import (
    AllocatedDevice,
    allocation_charge_milli,
    charged_milli,
    gpu_claim,
)
from apps.orchestration import manifests as m

H100 = GpuClassSpec("H100", "whole", 81559, "NVIDIA-H100-80GB-HBM3", allocation_mode="dra")
L40S = GpuClassSpec(
    "L40S", "timeslice", 46068, "NVIDIA-L40S", timeslice_replicas=4, allocation_mode="dra"
)
A100 = GpuClassSpec(
    "A100", "mig", 81920, "NVIDIA-A100-SXM4-80GB", mig_profiles=("1g.10gb", "3g.40gb")
)
PRODUCT = 'device.attributes["gpu.nvidia.com"].productName.replace(" ", "-") == '


def _spec(gpu: GpuClassSpec, milli: int, **kw: Any) -> m.WorkloadSpec:
    values: dict[str, Any] = {
        "id": 7,
        "name": "train",
        "kind": "training",
        "team_slug": "vision",
        "namespace": "team-vision",
        "owner": "alice",
        "image": "busybox",
        "gpu_limits": {"nvidia.com/gpu": "2"},
        "gpu_product": gpu.product_label,
        "sharing_mode": gpu.sharing_mode,
        "priority_class": "training",
        "gpu_claim": gpu_claim(milli, gpu),
        **kw,
    }
    return m.WorkloadSpec(**values)


def _by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


def test_gang_replicas_claim_exactly_their_placed_gpus_and_no_extended_resources() -> None:
    placement = (
        m.ReplicaPlacement("h100-0", ("GPU-a", "GPU-b")),
        m.ReplicaPlacement("h100-1", ("GPU-c", "GPU-d")),
    )
    objects = m.workload_manifests(
        _spec(H100, 2000, replicas=2, gpus_per_replica=2, placement=placement)
    )
    template = _by_kind(objects, "ResourceClaimTemplate")
    assert objects[0] is template  # before the pods that name it
    assert template["metadata"]["name"] == "wl-7-gpu"
    assert template["spec"]["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "allocationMode": "ExactCount",
                        "count": 2,
                        "selectors": [
                            {"cel": {"expression": PRODUCT + '"NVIDIA-H100-80GB-HBM3"'}},
                            {
                                "cel": {
                                    "expression": 'device.attributes["gpu.nvidia.com"].uuid in '
                                    '["GPU-a", "GPU-b", "GPU-c", "GPU-d"]'
                                }
                            },
                        ],
                    },
                }
            ]
        }
    }
    pod = _by_kind(objects, "Job")["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "wl-7-gpu"}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpu"}]
    assert not any(k.startswith("nvidia.com/") for k in resources["limits"])


def test_a_shared_gpu_is_claimed_as_capacity_and_charged_by_what_it_consumed() -> None:
    claim = gpu_claim(500, L40S)
    (request,) = claim.requests
    assert request.capacity_mib == 2 * (46068 // 4)  # two of four slices
    objects = m.workload_manifests(
        _spec(L40S, 500, placement=(m.ReplicaPlacement("l40s-ts-0", ("GPU-x",)),))
    )
    exactly = _by_kind(objects, "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"][0][
        "exactly"
    ]
    assert exactly["capacity"] == {"requests": {"memory": "23034Mi"}}
    consumed = [AllocatedDevice("gpu", consumed_mib=23034)]
    assert allocation_charge_milli(consumed, L40S) == charged_milli(500, L40S) == 500


def test_a_mig_request_claims_its_profile_on_the_placed_gpu_and_is_charged_the_profile() -> None:
    spec = _spec(A100, 300, placement=(m.ReplicaPlacement("a100-0", ("GPU-p",)),))
    exactly = _by_kind(m.workload_manifests(spec), "ResourceClaimTemplate")["spec"]["spec"][
        "devices"
    ]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"
    expressions = [s["cel"]["expression"] for s in exactly["selectors"]]
    assert 'device.attributes["gpu.nvidia.com"].profile == "3g.40gb"' in expressions
    assert 'device.attributes["gpu.nvidia.com"].parentUUID in ["GPU-p"]' in expressions
    mig = [AllocatedDevice("mig", profile="3g.40gb")]
    assert allocation_charge_milli(mig, A100) == charged_milli(300, A100) == 500


def test_a_device_plugin_class_gets_no_claim() -> None:
    objects = m.workload_manifests(_spec(H100, 1000, gpu_claim=None))
    assert all(o["kind"] != "ResourceClaimTemplate" for o in objects)
    pod = _by_kind(objects, "Job")["spec"]["template"]["spec"]
    assert "resourceClaims" not in pod
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_a_gangs_claims_are_counted_against_the_namespace_quota_before_it_starts() -> None:
    """What a preemption's beneficiary waits for in its namespace's quota: for a DRA class the
    devices its pods' claims will request (one claim per pod from its template), under the key
    the API server's claim quota counts; no extended resource."""
    from apps.orchestration.services.objects import _pod_requests

    placement = (
        m.ReplicaPlacement("h100-0", ("GPU-a", "GPU-b")),
        m.ReplicaPlacement("h100-1", ("GPU-c", "GPU-d")),
    )
    objects = m.workload_manifests(
        _spec(H100, 2000, replicas=2, gpus_per_replica=2, placement=placement, gpu_limits={})
    )
    assert _pod_requests(objects) == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 4}
