"""GPU amounts and memory as the portal and the admin show them: ``{% load gpus %}`` then
``{{ milli|gpus }}`` (2500 → "2.5"), ``{{ mib|gib }}`` (81920 → "80 GiB") or
``{{ workload|charge }}`` (what was asked beside what is charged, in the class's units)."""

from __future__ import annotations

import math
from typing import Any

from django import template

from apps.catalog.core import format_gib
from apps.quotas.core import format_milli

register = template.Library()
gib_text = format_gib  # the admin shows memory the same way


@register.filter
def gpus(milli: int | None) -> str:
    return "—" if milli is None else format_milli(int(milli))


@register.filter
def gib(mib: Any) -> str:
    return format_gib(mib)


def charge_text(
    *, asked_milli: int, charged_milli: int, sharing_mode: str, slices: int | None = None
) -> str:
    """What one replica asked for and what it is charged, in what the class sells.

    Accounting charges what the cluster grants (DESIGN.md), so 0.25 GPU of a class with
    7 time slices per GPU is charged 2 slices, 0.286 GPU: "0.25 GPU asked · charged 0.286
    GPU: 2 of the 7 time slices of a GPU (sold in slices of 1/7 GPU)"."""
    asked = f"{format_milli(asked_milli)} GPU"
    if charged_milli == asked_milli:
        return f"{asked}, charged as asked"
    charged = f"charged {format_milli(charged_milli)} GPU"
    if sharing_mode == "timeslice" and slices:
        count = math.ceil(asked_milli * slices / 1000)
        return (
            f"{asked} asked · {charged}: {count} of the {slices} time slices of a GPU "
            f"(sold in slices of 1/{slices} GPU)"
        )
    if sharing_mode == "whole":
        return f"{asked} asked · {charged}: the class is sold in whole GPUs"
    if sharing_mode == "mig":
        return f"{asked} asked · {charged}: the MIG instance that holds it"
    if sharing_mode == "hami":
        return f"{asked} asked · {charged}: the vGPU cores and memory granted"
    return f"{asked} asked · {charged}, as granted"


@register.filter
def charge(workload: Any) -> str:
    """``charge_text`` of a workload (or anything with ``gpu_milli``, ``charged_milli`` and
    ``gpu_class``); "" when it is not charged yet."""
    charged = getattr(workload, "charged_milli", None)
    gpu_class = getattr(workload, "gpu_class", None)
    if not charged or gpu_class is None:
        return ""
    return charge_text(
        asked_milli=int(workload.gpu_milli),
        charged_milli=int(charged),
        sharing_mode=gpu_class.sharing_mode,
        slices=gpu_class.timeslice_replicas,
    )
