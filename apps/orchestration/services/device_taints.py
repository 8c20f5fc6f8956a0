"""GPUs that failed their health check, tainted in the cluster: the DeviceTaintRules their
faults call for are created, changed and removed to match ``ClusterNode.gpu_faults``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubernetes.dynamic.exceptions import ResourceNotFoundError

from apps.catalog.models import Cluster, ClusterNode
from apps.orchestration import cluster_reads
from apps.orchestration.kube import Kube
from apps.orchestration.manifests.device_taints import (
    TAINT_API_VERSION,
    TAINT_KIND,
    device_taint_rules,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaintResult:
    applied: int = 0
    removed: int = 0
    served: bool = True  # False: the cluster serves no DeviceTaintRule API


def _kube(cluster: Cluster) -> Kube:
    from apps.orchestration.clusters import kube_for

    return kube_for(cluster)


def device_taints_sync(
    *, cluster: Cluster, slices: list[dict[str, Any]] | None = None
) -> TaintResult:
    """One DeviceTaintRule per driver device on each faulty GPU of the cluster's nodes, with
    the fault's effect; the rules of GPUs healthy again removed. A cluster without the API
    (DRADeviceTaintRules off, or before 1.35) gets none: gpupaas' own placement still keeps
    the GPU off, and its own pass moves the work off a GPU that fell off the bus."""
    faults = {
        name: list(gpu_faults)
        for name, gpu_faults in ClusterNode.objects.filter(cluster=cluster)
        .exclude(gpu_faults=[])
        .values_list("name", "gpu_faults")
    }
    kube = _kube(cluster)
    try:
        kube.resource(TAINT_API_VERSION, TAINT_KIND)
    except ResourceNotFoundError:
        if faults:
            log.info(
                "cluster %s serves no %s %s: %d nodes' faulty GPUs are kept off by placement only",
                cluster.name,
                TAINT_API_VERSION,
                TAINT_KIND,
                len(faults),
            )
        return TaintResult(served=False)
    wanted = device_taint_rules(
        faults, cluster_reads.dra_slices(cluster) if slices is None else slices
    )
    names = {rule["metadata"]["name"] for rule in wanted}
    applied = sum(1 for rule in wanted if (done := kube.apply(rule)).created or done.patched)
    removed = 0
    for rule in kube.list_owned(TAINT_API_VERSION, TAINT_KIND):
        name = rule["metadata"]["name"]
        if name not in names and kube.delete(TAINT_API_VERSION, TAINT_KIND, name, None):
            removed += 1
    if applied or removed:
        log.info("cluster %s: %d device taints set, %d removed", cluster.name, applied, removed)
    return TaintResult(applied=applied, removed=removed)
