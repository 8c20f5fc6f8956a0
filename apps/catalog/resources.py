"""Fraction → Kubernetes resources, exactly as DESIGN.md maps each sharing mode. Pure.

The orchestration manifests, the scheduler's accounting and the portal's sizing helper all
read the mapping from here."""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec


class ResourceMappingError(ValueError):
    """A request that the class's sharing mode cannot express."""


@dataclass(frozen=True)
class GpuResources:
    """Extended resources of one replica, and how to show them to a person."""

    limits: dict[str, str]
    description: str
    memory_isolated: bool


def mig_profile_for(milli: int, gpu: GpuClassSpec) -> str:
    """The MIG profile a fraction gets; ResourceMappingError when no offered profile holds it."""
    profile = catalog_core.mig_profile_for(gpu, milli)
    if profile is None:
        needed = math.ceil(gpu.memory_mib * milli / 1000)
        raise ResourceMappingError(
            f"No MIG profile of {gpu.name} holds {milli / 1000:g} GPU ({needed} MiB); "
            f"the largest offered is {catalog_core.largest_mig_profile(gpu)}."
        )
    return profile


def gpu_resources(milli: int, gpu: GpuClassSpec) -> GpuResources:
    """Resources one replica asks for, for ``milli`` milli-GPU of class ``gpu``."""
    if milli <= 0:
        raise ResourceMappingError("A GPU amount must be positive.")
    mode = gpu.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        count = math.ceil(milli / 1000)
        shown = f"{count} × {gpu.name}"
        if milli % 1000:
            shown += f" (rounded up from {milli / 1000:g}: {gpu.name} is not shared)"
        return GpuResources({"nvidia.com/gpu": str(count)}, shown, True)
    if mode == catalog_core.SHARING_TIMESLICE:
        replicas = gpu.timeslice_replicas or 1
        slots = math.ceil(milli * replicas / 1000)
        return GpuResources(
            {"nvidia.com/gpu.shared": str(slots)},
            f"{slots} of {replicas} time slices per {gpu.name} — time-sliced: no memory isolation",
            False,
        )
    if mode == catalog_core.SHARING_MIG:
        if milli > 1000:
            raise ResourceMappingError(
                f"{gpu.name} is partitioned with MIG: ask for at most one GPU per replica."
            )
        profile = mig_profile_for(milli, gpu)
        return GpuResources(
            {f"nvidia.com/mig-{profile}": "1"},
            f"{milli / 1000:g} × {gpu.name} → MIG {profile}",
            True,
        )
    if mode == catalog_core.SHARING_HAMI:
        if milli >= 1000:
            count = math.ceil(milli / 1000)
            return GpuResources(
                {
                    "nvidia.com/gpu": str(count),
                    "nvidia.com/gpumem": str(gpu.memory_mib),
                    "nvidia.com/gpucores": "100",
                },
                f"{count} × {gpu.name} (HAMi, whole GPUs)",
                True,
            )
        memory = math.ceil(gpu.memory_mib * milli / 1000)
        cores = max(1, math.ceil(milli / 10))
        return GpuResources(
            {
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem": str(memory),
                "nvidia.com/gpucores": str(cores),
            },
            f"{milli / 1000:g} × {gpu.name} → HAMi vGPU: {memory} MiB, {cores}% of the cores",
            True,
        )
    raise ResourceMappingError(f"Unknown sharing mode {mode!r}.")
