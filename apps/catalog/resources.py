"""Fraction → Kubernetes resources, exactly as DESIGN.md maps each sharing mode. Pure.

The orchestration manifests, the scheduler's accounting and the portal's sizing helper all
read the mapping from here."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec

# The node labels of NVIDIA's GPU feature discovery: the GPUs' product (what a class's
# product_label names), how many a node has, and the nodes that have any.
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_NODES_SELECTOR = "nvidia.com/gpu.present=true"
# The extended resource of one MIG instance is this prefix and the profile (nvidia.com/mig-1g.10gb).
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_resource(profile: str) -> str:
    """The extended resource the device plugin advertises for an instance of ``profile``."""
    return f"{MIG_RESOURCE_PREFIX}{profile}"


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
            {mig_resource(profile): "1"},
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


def node_sharing_mode(labels: Mapping[str, str], allocatable: Mapping[str, object]) -> str:
    """The sharing mode a node offers its GPUs in, read back from the resources it advertises
    (what :func:`gpu_resources` asks for in each mode) and its time-slicing label."""
    if any(k.startswith(MIG_RESOURCE_PREFIX) for k in allocatable):
        return catalog_core.SHARING_MIG
    if "nvidia.com/gpumem" in allocatable:
        return catalog_core.SHARING_HAMI
    if (
        "nvidia.com/gpu.shared" in allocatable
        or labels.get("nvidia.com/gpu.sharing-strategy") == "time-slicing"
    ):
        return catalog_core.SHARING_TIMESLICE
    return catalog_core.SHARING_WHOLE


def quota_resources(limit_milli: int, gpu: GpuClassSpec) -> dict[str, int]:
    """What a team's limit of ``limit_milli`` milli-GPU on ``gpu`` allows of each extended
    resource, for its namespace's ResourceQuota (classes sharing a resource add up there).

    Whole GPUs and time slices as many as the limit buys; a MIG class caps each profile at
    the number of instances the limit could buy; a HAMi class caps both vGPUs and their
    memory. A mode the catalog does not know allows nothing. A class allocated through DRA
    caps the devices its claims may request of the driver's device class instead
    (:func:`dra_quota_resources`)."""
    if gpu.allocation_mode == catalog_core.ALLOCATION_DRA:
        return dra_quota_resources(limit_milli, gpu)
    mode = gpu.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        return {"nvidia.com/gpu": limit_milli // 1000}
    if mode == catalog_core.SHARING_TIMESLICE:
        return {"nvidia.com/gpu.shared": limit_milli * (gpu.timeslice_replicas or 1) // 1000}
    if mode == catalog_core.SHARING_MIG:
        allowed: dict[str, int] = {}
        for profile in gpu.mig_profiles:
            resource = mig_resource(profile)
            per_instance = mig_instance_milli(profile, gpu)
            allowed[resource] = allowed.get(resource, 0) + limit_milli // per_instance
        return allowed
    if mode == catalog_core.SHARING_HAMI:
        return {
            "nvidia.com/gpu": limit_milli * (gpu.hami_split_count or 1) // 1000,
            "nvidia.com/gpumem": limit_milli * gpu.memory_mib // 1000,
        }
    return {}


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


# --- Dynamic Resource Allocation ---------------------------------------------------------------
# A class allocated through DRA asks for devices of NVIDIA's DRA driver (driver gpu.nvidia.com)
# in a ResourceClaim per replica instead of extended resources. The device classes are the ones
# the driver installs: gpu.nvidia.com (whole GPUs, device type "gpu") and mig.nvidia.com (MIG
# devices, type "mig"). A time-sliced GPU is one device that allows several allocations, each
# consuming part of its memory capacity (consumable capacity, KEP-5075): a class of R slices
# per GPU asks for k × (memory ÷ R).
DRA_DRIVER = "gpu.nvidia.com"
GPU_DEVICE_CLASS = "gpu.nvidia.com"
MIG_DEVICE_CLASS = "mig.nvidia.com"
DEVICE_TYPE_GPU = "gpu"
DEVICE_TYPE_MIG = "mig"
# The capacity a shared GPU's claims consume.
SHARED_CAPACITY = "memory"


def mig_instance_milli(profile: str, gpu: GpuClassSpec) -> int:
    """What one MIG instance of ``profile`` counts against a limit: its share of the GPU's
    memory, in milli-GPU (at least 1)."""
    memory = catalog_core.mig_profile_memory_mib(profile) or gpu.memory_mib
    return max(1, math.ceil(memory * 1000 / gpu.memory_mib))


# A ResourceQuota counts the devices a namespace's ResourceClaims request per device class
# under this name (the API server's quota evaluator for claims; no "requests." prefix).
DEVICE_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def device_quota_key(device_class: str) -> str:
    """The ResourceQuota key for the devices claimed of ``device_class``."""
    return f"{device_class}{DEVICE_QUOTA_SUFFIX}"


def dra_quota_resources(limit_milli: int, gpu: GpuClassSpec) -> dict[str, int]:
    """The devices a team's limit on a DRA class lets its claims request, per device class:
    whole GPUs as many as the limit buys; a time-sliced class one device per slice (each
    replica's claim of a shared GPU requests one device, whatever capacity it consumes); a MIG
    class as many instances as the limit buys of its smallest profile (one device class holds
    every profile). Kubernetes counts devices, not capacity: the portal's own quota stays the
    exact one, this is the cluster's second ceiling."""
    mode = gpu.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        return {device_quota_key(GPU_DEVICE_CLASS): limit_milli // 1000}
    if mode == catalog_core.SHARING_TIMESLICE:
        slices = limit_milli * (gpu.timeslice_replicas or 1) // 1000
        return {device_quota_key(GPU_DEVICE_CLASS): slices}
    if mode == catalog_core.SHARING_MIG:
        instances = [limit_milli // mig_instance_milli(p, gpu) for p in gpu.mig_profiles]
        return {device_quota_key(MIG_DEVICE_CLASS): max(instances, default=0)}
    return {}


def device_attribute(name: str) -> str:
    """A CEL reference to an attribute of the driver's devices."""
    return f'device.attributes["{DRA_DRIVER}"].{name}'


def cel_string(value: str) -> str:
    """A CEL string literal (JSON escaping is valid CEL)."""
    return json.dumps(value)


def cel_in(name: str, values: Sequence[str]) -> str:
    return f"{device_attribute(name)} in [{', '.join(cel_string(v) for v in values)}]"


def product_selector(product_label: str) -> str:
    """The class's product as a selector on the device's productName: the driver reports NVML's
    name ("NVIDIA H100 80GB HBM3"), GPU feature discovery's label is the same with dashes for
    spaces (NVIDIA-H100-80GB-HBM3), which is what a class names."""
    return f'{device_attribute("productName")}.replace(" ", "-") == {cel_string(product_label)}'


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a replica's ResourceClaim: ``count`` devices of ``device_class`` matching
    every selector; ``capacity_mib``: the memory each one consumes of a shared GPU."""

    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...]
    capacity_mib: int | None = None


@dataclass(frozen=True)
class GpuClaim:
    """What one replica claims through DRA, and how to show it to a person."""

    requests: tuple[DeviceRequest, ...]
    description: str


def timeslice_step_mib(gpu: GpuClassSpec) -> int:
    """The memory one time slice of a shared GPU stands for in its claims (whole MiB)."""
    return max(1, gpu.memory_mib // max(1, gpu.timeslice_replicas or 1))


def gpu_claim(milli: int, gpu: GpuClassSpec) -> GpuClaim:
    """The devices one replica of ``milli`` on ``gpu`` claims through DRA: the same amounts
    :func:`gpu_resources` asks of the device plugin (and refuses the same requests).

    - whole: ``ceil(milli/1000)`` GPUs of the class's product, exactly;
    - mig: one MIG device of the profile :func:`mig_profile_for` picks;
    - timeslice: whole GPUs at their full capacity for every R slices, and the rest as one
      shared GPU's capacity (slices × memory/R).
    """
    resources = gpu_resources(milli, gpu)
    product = product_selector(gpu.product_label) if gpu.product_label else ""
    selectors = (product,) if product else ()
    mode = gpu.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        count = int(resources.limits["nvidia.com/gpu"])
        request = DeviceRequest("gpu", GPU_DEVICE_CLASS, count, selectors)
        return GpuClaim((request,), resources.description)
    if mode == catalog_core.SHARING_MIG:
        return mig_claim(mig_profile_for(milli, gpu), gpu, resources.description)
    if mode == catalog_core.SHARING_TIMESLICE:
        replicas = gpu.timeslice_replicas or 1
        step = timeslice_step_mib(gpu)
        whole, part = divmod(int(resources.limits["nvidia.com/gpu.shared"]), replicas)
        requests = []
        if whole:
            requests.append(
                DeviceRequest("gpu", GPU_DEVICE_CLASS, whole, selectors, step * replicas)
            )
        if part:
            name = "gpu-part" if whole else "gpu"
            requests.append(DeviceRequest(name, GPU_DEVICE_CLASS, 1, selectors, step * part))
        return GpuClaim(tuple(requests), resources.description)
    raise ResourceMappingError(
        f"{gpu.name} ({mode}) cannot be allocated through Dynamic Resource Allocation."
    )


def mig_claim(profile: str, gpu: GpuClassSpec, description: str = "") -> GpuClaim:
    """One MIG device of ``profile`` on a GPU of the class's product (the profile the scheduler
    placed a request on)."""
    selectors = (product_selector(gpu.product_label),) if gpu.product_label else ()
    mig = (*selectors, f"{device_attribute('profile')} == {cel_string(profile)}")
    shown = description or f"MIG {profile} of {gpu.name}"
    return GpuClaim((DeviceRequest("gpu", MIG_DEVICE_CLASS, 1, mig),), shown)


@dataclass(frozen=True)
class AllocatedDevice:
    """One device of a claim's allocation (status.allocation.devices.results joined to its
    ResourceSlice), as the charge reads it."""

    type: str  # DEVICE_TYPE_GPU or DEVICE_TYPE_MIG
    profile: str = ""  # a MIG device's profile
    consumed_mib: int | None = None  # a shared GPU: the capacity this allocation consumed


def mig_profile_charge(profile: str, gpu: GpuClassSpec) -> int:
    """A MIG instance's charge: the larger of its compute (n/7) and memory shares, ≤ 1000."""
    match = catalog_core.MIG_PROFILE_RE.match(profile)
    slices = int(match.group("slices")) if match else MIG_COMPUTE_SLICES
    profile_mib = catalog_core.mig_profile_memory_mib(profile) or gpu.memory_mib
    compute = _ceil_div(slices * 1000, MIG_COMPUTE_SLICES)
    memory = _ceil_div(profile_mib * 1000, max(1, gpu.memory_mib))
    return min(1000, max(compute, memory))


def allocation_charge_milli(devices: Sequence[AllocatedDevice], gpu: GpuClassSpec) -> int:
    """Milli-GPU a replica's allocated devices are charged: a whole GPU 1000; a MIG device as
    :func:`mig_profile_charge`; a shared GPU its consumed capacity in whole slices,
    ``ceil(slices·1000/R)`` — the charge :func:`charged_milli` gives the request it was
    claimed for."""
    total = 0
    replicas = gpu.timeslice_replicas or 1
    step = timeslice_step_mib(gpu)
    for device in devices:
        if device.type == DEVICE_TYPE_MIG:
            total += mig_profile_charge(device.profile, gpu)
        elif device.consumed_mib is not None and gpu.sharing_mode == catalog_core.SHARING_TIMESLICE:
            slices = min(replicas, _ceil_div(device.consumed_mib, step))
            total += _ceil_div(slices * 1000, replicas)
        else:
            total += 1000
    return total
