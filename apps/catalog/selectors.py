"""Reads for the catalog: what users may pick."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.catalog.models import ClusterNode, GpuClass, Image


def gpu_classes_offered() -> QuerySet[GpuClass]:
    return GpuClass.objects.filter(enabled=True).order_by("name")


def ready_nodes(gpu_class: GpuClass) -> QuerySet[ClusterNode]:
    """The class's schedulable, ready nodes of enabled clusters: where it can run now."""
    return ClusterNode.objects.filter(
        cluster__enabled=True, gpu_class=gpu_class, schedulable=True, ready=True
    ).order_by("cluster__name", "name")


def sharing_class_names(*, besides: GpuClass | None = None) -> list[str]:
    """Names of the offered classes that share GPUs (all but ``whole``), for hints."""
    qs = gpu_classes_offered().exclude(sharing_mode=GpuClass.Sharing.WHOLE)
    if besides is not None:
        qs = qs.exclude(pk=besides.pk)
    return list(qs.values_list("name", flat=True))


def images_offered() -> QuerySet[Image]:
    return Image.objects.filter(enabled=True).order_by("name")
