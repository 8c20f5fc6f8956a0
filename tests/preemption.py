"""A fleet for tests of the preemption dry run: one 8-GPU node of a class, and a workload
running on all of its GPUs, as a scheduling cycle would have admitted it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory

GPUS = 8


def one_node(gpu_class: GpuClass, name: str = "") -> ClusterNode:
    hub, _ = Cluster.objects.get_or_create(name="hub", defaults={"connection": "in_cluster"})
    name = name or f"{gpu_class.name.lower()}-0"
    return ClusterNode.objects.create(
        cluster=hub,
        name=name,
        gpu_class=gpu_class,
        gpu_count=GPUS,
        gpu_uuids=[f"GPU-{name}-{g}" for g in range(GPUS)],
        cpu_milli=192_000,
        memory_mib=2_000_000,
    )


def running_on_every_gpu(node: ClusterNode, **kw: Any) -> Workload:
    """A workload holding every GPU of ``node``, admitted two hours ago (past any minimum
    runtime): a development notebook unless ``kw`` says otherwise."""
    values: dict[str, Any] = {
        "kind": Workload.Kind.NOTEBOOK,
        "priority_class": Workload.Priority.DEVELOPMENT,
        "gpu_class": node.gpu_class,
        "gpu_milli": GPUS * 1000,
        "state": core.RUNNING,
        "admitted_at": timezone.now() - timedelta(hours=2),
        "cluster": node.cluster,
        "placement": {
            "cluster": node.cluster.name,
            "replicas": [{"node": node.name, "gpus": list(range(GPUS)), "units": 1000}],
        },
    }
    values.update(kw)
    return WorkloadFactory(**values)
