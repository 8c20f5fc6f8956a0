"""Reads for the catalog: what users may pick."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.catalog.models import GpuClass, Image


def gpu_classes_offered() -> QuerySet[GpuClass]:
    return GpuClass.objects.filter(enabled=True).order_by("name")


def images_offered() -> QuerySet[Image]:
    return Image.objects.filter(enabled=True).order_by("name")
