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
        whole, part = divmod(slots, replicas)
        pieces = []
        if whole:
            pieces.append(f"{whole} × {gpu.name} (all {replicas} time slices of each)")
        if part:
            pieces.append(f"{part} of the {replicas} time slices of one {gpu.name}")
        return GpuResources(
            {"nvidia.com/gpu.shared": str(slots)},
            f"{' + '.join(pieces)} — time-sliced: no memory isolation",
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


# A MIG-capable GPU (A100, H100, H200) has seven compute slices; a profile ``<n>g.<m>gb`` gets
# n of them.
MIG_COMPUTE_SLICES = 7
# HAMi's ``nvidia.com/gpucores`` is a percentage: the finest compute share it grants is 10 milli.
HAMI_CORE_MILLI = 10


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def charged_milli(milli: int, gpu: GpuClassSpec) -> int:
    """Milli-GPU one replica of ``milli`` on ``gpu`` is charged: what the cluster grants it.

    DESIGN.md: accounting charges what the cluster grants, never less. Every share is
    rounded *up* to a whole milli, so the charge is never below the share the resources of
    :func:`gpu_resources` hold (the property ``tests/catalog`` checks):

    - ``whole``: whole GPUs, ``ceil(milli/1000)·1000``.
    - ``timeslice`` (R slices per GPU): whole slices, ``ceil(ceil(milli·R/1000)·1000/R)``;
      1 milli of a 4-slice GPU is charged 250, of a 3-slice GPU 334.
    - ``mig``: the profile it gets, as the larger of its two physical shares: compute
      slices ``n/7`` and memory ``profile memory / GPU memory``. Either one alone can fall
      below the request (3g.40gb is 3/7 = 429 milli of compute but half of the memory), and
      the other tenants of the GPU can only use what is left of both; capped at one GPU.
    - ``hami``: whole GPUs from 1000 up; below, the larger of the cores granted (percent,
      so ``ceil(milli/10)·10``) and the memory granted (whole MiB of the GPU's memory).

    Raises ResourceMappingError for a request the mode cannot express, like gpu_resources.
    """
    resources = gpu_resources(milli, gpu)  # validates the request the same way
    mode = gpu.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        return math.ceil(milli / 1000) * 1000
    if mode == catalog_core.SHARING_TIMESLICE:
        replicas = gpu.timeslice_replicas or 1
        slots = int(resources.limits["nvidia.com/gpu.shared"])
        return _ceil_div(slots * 1000, replicas)
    if mode == catalog_core.SHARING_MIG:
        profile = mig_profile_for(milli, gpu)
        match = catalog_core.MIG_PROFILE_RE.match(profile)
        slices = int(match.group("slices")) if match else MIG_COMPUTE_SLICES
        profile_mib = catalog_core.mig_profile_memory_mib(profile) or gpu.memory_mib
        compute = _ceil_div(slices * 1000, MIG_COMPUTE_SLICES)
        memory = _ceil_div(profile_mib * 1000, max(1, gpu.memory_mib))
        return min(1000, max(compute, memory, milli))
    # hami (gpu_resources has refused any other mode)
    if milli >= 1000:
        return math.ceil(milli / 1000) * 1000
    cores = int(resources.limits["nvidia.com/gpucores"]) * HAMI_CORE_MILLI
    memory = _ceil_div(int(resources.limits["nvidia.com/gpumem"]) * 1000, max(1, gpu.memory_mib))
    return min(1000, max(cores, memory))
