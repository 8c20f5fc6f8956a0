"""The node inventory: the cluster's GPU nodes mirrored into ClusterNode, and each GPU
class's capacity."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.resources import (
    GPU_COUNT_LABEL,
    MIG_RESOURCE_PREFIX,
    PRODUCT_LABEL,
    node_sharing_mode,
)
from apps.orchestration import cluster_reads
from apps.orchestration.errors import ClusterRefused
from apps.orchestration.services.device_taints import device_taints_sync

log = logging.getLogger(__name__)


def _mig_layout(allocatable: Mapping[str, Any], gpu_count: int) -> list[str]:
    layout: list[str] = []
    for resource in sorted(allocatable):
        if resource.startswith(MIG_RESOURCE_PREFIX) and gpu_count:
            per_gpu = int(str(allocatable[resource])) // gpu_count
            layout.extend([resource.removeprefix(MIG_RESOURCE_PREFIX)] * per_gpu)
    return layout


def _gpu_uuids(annotations: Mapping[str, str]) -> list[str]:
    """GPU UUIDs a node advertises (a JSON list, or a comma-separated list)."""
    raw = str(annotations.get("kubesim.io/gpu-uuids") or "").strip()
    if raw.startswith("["):
        try:
            return [str(u) for u in json.loads(raw)]
        except ValueError:
            return []
    return [u.strip() for u in raw.split(",") if u.strip()]


def _quantity_milli(value: Any) -> int:
    text = str(value or "0")
    if text.endswith("m"):
        return int(text[:-1])
    return int(float(text) * 1000)


def _quantity_mib(value: Any) -> int:
    text = str(value or "0")
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2, "Pi": 1024**3}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(int(text) / (1024 * 1024))


# The kubelet reports at most 50 images a node (--node-status-max-images); names per image vary.
MAX_NODE_IMAGE_NAMES = 500


def node_image_names(status: Mapping[str, Any]) -> list[str]:
    """Every name the node's images are known by (``status.images[].names``: tags and
    digests), sorted; empty when the node reports none (simulated nodes)."""
    names = {
        str(name)
        for image in status.get("images") or []
        if isinstance(image, Mapping)
        for name in image.get("names") or []
        if name
    }
    return sorted(names)[:MAX_NODE_IMAGE_NAMES]


def cluster_inventory_sync(*, cluster: Cluster) -> int:
    """Mirror the cluster's GPU nodes into ClusterNode, with the devices each publishes
    through DRA, update each class's capacity, and taint the devices of GPUs that failed
    their health check (:func:`device_taints_sync`)."""
    slices = cluster_reads.dra_slices(cluster)
    stored = cluster_inventory_store(
        cluster=cluster,
        nodes=cluster_reads.gpu_nodes(cluster),
        dra_devices=cluster_reads.dra_devices_by_node(cluster, slices),
    )
    # The faulty GPUs' devices tainted (or no longer), from the same list of slices. A refusal
    # (no rights on DeviceTaintRules, an admission policy) is logged: the inventory stands, and
    # the portal's own placement keeps the GPUs off.
    try:
        device_taints_sync(cluster=cluster, slices=slices)
    except ClusterRefused as exc:
        log.warning("cluster %s: device taints not written: %s", cluster.name, exc)
    return stored


def cluster_inventory_store(
    *,
    cluster: Cluster,
    nodes: Iterable[dict[str, Any]],
    dra_devices: Mapping[str, int] | None = None,
) -> int:
    """The inventory from nodes already read (a list, or a watch's copy of the GPU nodes);
    ``dra_devices`` per node name when they were read too (None: as last recorded)."""
    classes = {(c.product_label, c.sharing_mode): c for c in GpuClass.objects.all()}
    seen = []
    with transaction.atomic():
        for node in nodes:
            meta, status = node["metadata"], node.get("status") or {}
            labels = meta.get("labels") or {}
            allocatable = status.get("allocatable") or {}
            mode = node_sharing_mode(labels, allocatable)
            gpu_count = int(labels.get(GPU_COUNT_LABEL) or 0)
            annotations = meta.get("annotations") or {}
            uuids = _gpu_uuids(annotations)
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            ClusterNode.objects.update_or_create(
                cluster=cluster,
                name=meta["name"],
                defaults={
                    "gpu_class": classes.get((labels.get(PRODUCT_LABEL, ""), mode)),
                    "gpu_count": gpu_count,
                    "gpu_uuids": uuids,
                    "mig_layout": _mig_layout(allocatable, gpu_count) if mode == "mig" else [],
                    "cpu_milli": _quantity_milli(allocatable.get("cpu")),
                    "memory_mib": _quantity_mib(allocatable.get("memory")),
                    "labels": labels,
                    "allocatable": {k: str(v) for k, v in allocatable.items()},
                    "images": node_image_names(status),
                    "schedulable": not (node.get("spec") or {}).get("unschedulable", False),
                    "ready": ready,
                    "last_seen_at": timezone.now(),
                    **(
                        {"dra_devices": dra_devices.get(meta["name"], 0)}
                        if dra_devices is not None
                        else {}
                    ),
                },
            )
            seen.append(meta["name"])
        ClusterNode.objects.filter(cluster=cluster).exclude(name__in=seen).delete()
        for gpu_class in GpuClass.objects.all():
            total = ClusterNode.objects.filter(
                gpu_class=gpu_class, cluster__enabled=True
            ).aggregate(n=Sum("gpu_count"))["n"]
            if (total or 0) != gpu_class.capacity_gpus:
                gpu_class.capacity_gpus = total or 0
                gpu_class.save(update_fields=["capacity_gpus"])
    return len(seen)
