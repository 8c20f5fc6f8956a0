"""Device taints for GPUs that failed their health check: one DeviceTaintRule per device of
NVIDIA's DRA driver that sits on the faulty GPU (the GPU itself and its MIG devices). Pure.

A DeviceTaintRule (``resource.k8s.io/v1beta2``, Kubernetes' DRADeviceTaintRules, beta in 1.36)
taints devices as if the driver had written the taint into its ResourceSlice, without touching
the driver's objects: what an external health monitor is meant to use. ``NoSchedule`` keeps new
claims off the device; ``NoExecute`` also makes kube-controller-manager's device taint eviction
controller delete the pods whose claims use it. Only that device stops, not its node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apps.catalog.resources import DRA_DRIVER
from apps.orchestration.manifests.base import LABEL_MANAGED_BY, MANAGED_BY, Manifest

TAINT_API_VERSION = "resource.k8s.io/v1beta2"
TAINT_KIND = "DeviceTaintRule"
TAINT_KEY = "gpupaas.io/gpu-health"
LABEL_GPU_NODE = "gpupaas.io/gpu-node"
NAME_PREFIX = "gpupaas-gpu-"
_NOT_NAME = re.compile(r"[^a-z0-9.-]+")


def _attribute(device: Mapping[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string") or "") if isinstance(value, Mapping) else ""


def devices_by_gpu(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[str]]:
    """(node, GPU UUID) -> the names of the driver's devices on that GPU: the GPU and each of
    its MIG devices (by their ``parentUUID``)."""
    found: dict[tuple[str, str], list[str]] = {}
    for piece in slices:
        spec = piece.get("spec") or {}
        node = spec.get("nodeName") or (spec.get("pool") or {}).get("name")
        if spec.get("driver") != DRA_DRIVER or not node:
            continue
        for device in spec.get("devices") or ():
            uuid = _attribute(device, "parentUUID") or _attribute(device, "uuid")
            if uuid and device.get("name"):
                found.setdefault((str(node), uuid), []).append(str(device["name"]))
    return found


def rule_name(node: str, device: str) -> str:
    name = _NOT_NAME.sub("-", f"{NAME_PREFIX}{node}-{device}".lower()).strip("-.")
    return name[:253]


def device_taint_rules(
    faults: Mapping[str, Sequence[Mapping[str, str]]],
    slices: Iterable[Mapping[str, Any]],
) -> list[Manifest]:
    """The rules the faults of each node (``ClusterNode.gpu_faults`` by node name) call for,
    one per device of a faulty GPU that the driver publishes. A fault on a GPU the driver does
    not publish (a device-plugin node) gives none: there, only gpupaas' own placement keeps it
    off."""
    on_gpu = devices_by_gpu(slices)
    rules: list[Manifest] = []
    for node, node_faults in sorted(faults.items()):
        for fault in node_faults:
            effect = fault.get("effect") or "NoSchedule"
            for device in sorted(on_gpu.get((node, str(fault.get("uuid") or "")), ())):
                rules.append(
                    {
                        "apiVersion": TAINT_API_VERSION,
                        "kind": TAINT_KIND,
                        "metadata": {
                            "name": rule_name(node, device),
                            "labels": {LABEL_MANAGED_BY: MANAGED_BY, LABEL_GPU_NODE: node},
                            "annotations": {
                                "gpupaas.io/reason": str(fault.get("reason") or "")[:500]
                            },
                        },
                        "spec": {
                            "deviceSelector": {
                                "driver": DRA_DRIVER,
                                "pool": node,
                                "device": device,
                            },
                            "taint": {
                                "key": TAINT_KEY,
                                "value": str(fault.get("code") or "unhealthy")[:63],
                                "effect": effect,
                            },
                        },
                    }
                )
    return rules
