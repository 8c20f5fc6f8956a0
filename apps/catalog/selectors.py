"""Reads for the catalog: what users may pick."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from apps.catalog import core
from apps.catalog.models import ClusterNode, GpuClass, Image, NodeMaintenance


def gpu_classes_offered() -> QuerySet[GpuClass]:
    return GpuClass.objects.filter(enabled=True).order_by("name")


def ready_nodes(gpu_class: GpuClass, *, now: datetime | None = None) -> QuerySet[ClusterNode]:
    """The class's nodes of enabled clusters that take work now: where it can run (not
    cordoned, Ready, health check not failed, not in maintenance: :func:`node_blockers`)."""
    nodes = ClusterNode.objects.filter(
        cluster__enabled=True, gpu_class=gpu_class, schedulable=True, ready=True
    ).order_by("cluster__name", "name")
    blocked = node_blockers(nodes, now=now or timezone.now())
    return nodes.exclude(pk__in=list(blocked))


def dra_unpublished(gpu_class: GpuClass) -> bool:
    """Whether the class allocates through DRA while none of its nodes (of enabled clusters,
    as the inventory last read them) publishes a device: nothing of it could start. False for a
    class without nodes in the inventory (its capacity is unknown, not absent)."""
    if gpu_class.allocation_mode != core.ALLOCATION_DRA:
        return False
    nodes = ClusterNode.objects.filter(cluster__enabled=True, gpu_class=gpu_class)
    return nodes.exists() and not nodes.filter(dra_devices__gt=0).exists()


def sharing_class_names(*, besides: GpuClass | None = None) -> list[str]:
    """Names of the offered classes that share GPUs (all but ``whole``), for hints."""
    qs = gpu_classes_offered().exclude(sharing_mode=GpuClass.Sharing.WHOLE)
    if besides is not None:
        qs = qs.exclude(pk=besides.pk)
    return list(qs.values_list("name", flat=True))


def images_offered() -> QuerySet[Image]:
    return Image.objects.filter(enabled=True).order_by("name")


def node_blockers(nodes: Iterable[ClusterNode], *, now: datetime) -> dict[int, list[str]]:
    """Per node id, why it takes no new placements now (only nodes that take none)."""
    rows = list(nodes)
    windows: dict[int, list[core.MaintenanceWindow]] = {}
    for w in NodeMaintenance.objects.filter(
        node__in=[n.pk for n in rows], starts_at__lte=now, ends_at__gt=now
    ):
        windows.setdefault(w.node_id, []).append(
            core.MaintenanceWindow(w.starts_at, w.ends_at, w.reason, w.drain)
        )
    dra_classes = set(
        GpuClass.objects.filter(allocation_mode=core.ALLOCATION_DRA).values_list("pk", flat=True)
    )
    blocked: dict[int, list[str]] = {}
    for node in rows:
        reasons = core.node_blockers(
            schedulable=node.schedulable,
            ready=node.ready,
            health_verdict=node.health_verdict,
            health_problems=node.health_problems or [],
            windows=windows.get(node.pk, []),
            now=now,
            dra_unpublished=node.dra_devices == 0 and node.gpu_class_id in dra_classes,
        )
        if reasons:
            blocked[node.pk] = reasons
    return blocked


def nodes_being_drained(*, now: datetime) -> QuerySet[NodeMaintenance]:
    """Open maintenance windows that move work off their node."""
    return NodeMaintenance.objects.filter(
        drain=True, starts_at__lte=now, ends_at__gt=now
    ).select_related("node", "node__cluster")


def image_availability(
    images: Iterable[Image], *, gpu_class: GpuClass | None = None
) -> dict[str, tuple[core.ImageOnCluster, ...]]:
    """For each image (by name), whether each enabled cluster holds it: on the GPU nodes of the
    inventory (those of ``gpu_class`` that take work, when given), from the images they report.
    One query. The inventory is the cache: it is refreshed from the nodes' status by every
    inventory pass (ORCHESTRATION_INVENTORY_SECONDS) and, with watches, at each node change."""
    nodes = (
        ready_nodes(gpu_class)
        if gpu_class is not None
        else ClusterNode.objects.filter(cluster__enabled=True)
    )
    rows = [
        core.NodeImages(cluster, name, tuple(str(i) for i in held or ()))
        for cluster, name, held in nodes.values_list("cluster__name", "name", "images")
    ]
    return core.images_on_clusters({i.name: i.reference for i in images}, rows)
