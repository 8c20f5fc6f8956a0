"""Reads for the catalog: what users may pick, and how much of each GPU class is free."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, QuerySet, Sum

from apps.catalog.models import ClusterNode, GpuClass, Image
from apps.workloads import core as workload_core
from apps.workloads.models import Workload


def gpu_classes_offered() -> QuerySet[GpuClass]:
    return GpuClass.objects.filter(enabled=True).order_by("name")


def images_offered() -> QuerySet[Image]:
    return Image.objects.filter(enabled=True).order_by("name")


@dataclass(frozen=True)
class GpuClassCapacity:
    gpu_class: GpuClass
    capacity_milli: int
    used_milli: int
    nodes: int
    from_inventory: bool

    @property
    def free_milli(self) -> int:
        return max(0, self.capacity_milli - self.used_milli)


def gpu_class_capacity(classes: QuerySet[GpuClass] | None = None) -> list[GpuClassCapacity]:
    """Capacity and free milli-GPU per class. Three queries whatever the number of classes.

    Capacity is the GPUs of ready, schedulable nodes of enabled clusters in the inventory;
    a class with no node in the inventory falls back to its admin-entered ``capacity_gpus``.
    Used is what admitted, starting and running workloads hold (``replicas × gpu_milli``).
    """
    chosen = list(classes if classes is not None else gpu_classes_offered())
    ids = [c.pk for c in chosen]
    inventory = {
        row["gpu_class_id"]: (row["gpus"] or 0, row["nodes"] or 0)
        for row in ClusterNode.objects.filter(
            gpu_class_id__in=ids, cluster__enabled=True, ready=True, schedulable=True
        )
        .values("gpu_class_id")
        .annotate(gpus=Sum("gpu_count"), nodes=Count("id"))
    }
    used = dict(
        Workload.objects.filter(gpu_class_id__in=ids, state__in=workload_core.ACTIVE_STATES)
        .values("gpu_class_id")
        .annotate(milli=Sum(F("gpu_milli") * F("replicas")))
        .values_list("gpu_class_id", "milli")
    )
    result = []
    for gpu_class in chosen:
        gpus, nodes = inventory.get(gpu_class.pk, (0, 0))
        from_inventory = nodes > 0
        capacity = gpus * 1000 if from_inventory else gpu_class.capacity_milli
        result.append(
            GpuClassCapacity(
                gpu_class=gpu_class,
                capacity_milli=capacity,
                used_milli=int(used.get(gpu_class.pk) or 0),
                nodes=nodes,
                from_inventory=from_inventory,
            )
        )
    return result
