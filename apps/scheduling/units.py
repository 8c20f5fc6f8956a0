"""How one replica's request becomes units of a GPU pool, per sharing mode (DESIGN.md).

A pool counts each GPU in *units*: milli-GPU (1000 per GPU) for ``whole`` and ``hami``
classes, time-slice replicas (R per GPU) for ``timeslice`` classes. MIG pools count
instances of a profile instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec
from apps.quotas.core import format_milli

MILLI = 1000


class DemandError(ValueError):
    """A request the class cannot serve, whatever the cluster's state."""


@dataclass(frozen=True)
class Demand:
    """What one replica takes: ``gpus`` GPUs with ``units`` each (0 GPUs: CPU only), or
    one MIG instance of ``mig_profile``; plus CPU and memory on the same node."""

    units: int
    gpus: int
    cpu_milli: int = 0
    memory_mib: int = 0
    mig_profile: str | None = None


def units_per_gpu(gpu_class: GpuClassSpec) -> int:
    if gpu_class.sharing_mode == catalog_core.SHARING_TIMESLICE:
        return max(1, gpu_class.timeslice_replicas or 1)
    return MILLI


def replica_demand(
    gpu_class: GpuClassSpec, gpu_milli: int, *, cpu_milli: int = 0, memory_mib: int = 0
) -> Demand:
    """The demand of one replica of ``gpu_milli`` on ``gpu_class``; DemandError if impossible.

    On a ``whole`` class a fraction is rounded up to a whole GPU (submission refuses such
    requests up front; rows from before that rule are still served).
    """
    mode = gpu_class.sharing_mode
    if gpu_milli <= 0:
        raise DemandError("The GPU amount must be positive (1000 = one GPU).")
    whole_gpus = math.ceil(gpu_milli / MILLI)
    if mode == catalog_core.SHARING_MIG:
        if gpu_milli > MILLI:
            raise DemandError(
                f"{gpu_class.name} is partitioned with MIG: ask for at most one GPU per replica."
            )
        profile = catalog_core.mig_profile_for(gpu_class, gpu_milli)
        if profile is None:
            raise DemandError(
                f"No MIG profile of {gpu_class.name} holds {format_milli(gpu_milli)} GPU; "
                f"the largest offered is {catalog_core.largest_mig_profile(gpu_class)}."
            )
        return Demand(0, 1, cpu_milli, memory_mib, profile)
    cap = units_per_gpu(gpu_class)
    if gpu_milli >= MILLI or mode == catalog_core.SHARING_WHOLE:
        return Demand(cap, whole_gpus, cpu_milli, memory_mib)
    if mode == catalog_core.SHARING_TIMESLICE:
        return Demand(math.ceil(gpu_milli * cap / MILLI), 1, cpu_milli, memory_mib)
    if mode == catalog_core.SHARING_HAMI:
        return Demand(gpu_milli, 1, cpu_milli, memory_mib)
    raise DemandError(f"Unknown sharing mode {mode!r} of {gpu_class.name}.")


def units_to_milli(gpu_class: GpuClassSpec, units: int) -> int:
    """Pool units back to milli-GPU (for free-capacity figures shown to people)."""
    return units * MILLI // units_per_gpu(gpu_class)
