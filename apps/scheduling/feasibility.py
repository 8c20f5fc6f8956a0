"""Requests that can never run, refused at submission with a message per field. Pure.

A request is impossible when no node of its class could ever hold one replica (more GPUs,
CPU or memory than the largest node has), when it asks for a fraction of a class that
does not share GPUs, when the class's sharing mode cannot express it (a MIG profile
larger than any offered), or when it exceeds the team's limit or the per-user cap. Such a
request would otherwise wait forever. Without a node inventory for the class (not synced
yet) the node checks are skipped: capacity is unknown, not absent.
"""

from __future__ import annotations

from collections.abc import Sequence

from apps.catalog import core as catalog_core
from apps.quotas.core import format_milli
from apps.scheduling.data import GpuClassSpec, NodeSpec, Quota
from apps.scheduling.units import DemandError, replica_demand


def sharing_classes_hint(classes: Sequence[GpuClassSpec]) -> str:
    names = sorted(c.name for c in classes if c.enabled and c.sharing_mode != "whole")
    return f" Classes that share GPUs: {', '.join(names)}." if names else ""


def request_problems(
    *,
    gpu_class: GpuClassSpec,
    gpu_milli: int,
    replicas: int,
    cpu_milli: int,
    memory_mib: int,
    nodes: Sequence[NodeSpec],
    quota: Quota | None,
    team: str,
    other_classes: Sequence[GpuClassSpec] = (),
) -> dict[str, str]:
    """Field → message for each reason the request can never be admitted."""
    errors: dict[str, str] = {}
    if gpu_milli <= 0 or replicas <= 0:
        return errors  # the request's own shape rules report these
    if gpu_class.sharing_mode == catalog_core.SHARING_WHOLE and gpu_milli % 1000:
        errors["gpu_milli"] = (
            f"{gpu_class.name} gives whole GPUs only; ask for "
            f"{format_milli(-(-gpu_milli // 1000) * 1000)} GPU or pick a class that shares "
            f"GPUs.{sharing_classes_hint(other_classes)}"
        )
        return errors
    try:
        demand = replica_demand(gpu_class, gpu_milli, cpu_milli=cpu_milli, memory_mib=memory_mib)
    except DemandError as exc:
        errors["gpu_milli"] = str(exc)
        return errors
    mine = [n for n in nodes if n.gpu_class == gpu_class.name and n.gpu_count > 0]
    if mine:
        most_gpus = max(n.gpu_count for n in mine)
        if demand.gpus > most_gpus:
            errors["gpu_milli"] = (
                f"One replica needs {demand.gpus} GPUs on one node, but the largest "
                f"{gpu_class.name} node has {most_gpus}. Use more replicas with at most "
                f"{most_gpus} GPUs each."
            )
        if demand.mig_profile and not any(demand.mig_profile in n.mig_layout for n in mine):
            errors["gpu_milli"] = (
                f"No {gpu_class.name} GPU is partitioned with a {demand.mig_profile} instance."
            )
        if cpu_milli > max(n.cpu_milli for n in mine):
            errors["cpu_milli"] = (
                f"No {gpu_class.name} node has {cpu_milli / 1000:g} CPU cores to give one replica."
            )
        if memory_mib > max(n.memory_mib for n in mine):
            errors["memory_mib"] = (
                f"No {gpu_class.name} node has {memory_mib} MiB of memory to give one replica."
            )
    total = gpu_milli * replicas
    limit = quota.limit_milli if quota else 0
    if limit <= 0:
        errors["gpu_class"] = f"{team} has no quota for {gpu_class.name}; ask a platform admin."
    elif total > limit:
        errors.setdefault("gpu_milli", "")
        errors["gpu_milli"] = errors["gpu_milli"] or (
            f"This asks for {format_milli(total)} GPU of {gpu_class.name}, more than "
            f"{team}'s limit of {format_milli(limit)} GPU."
        )
    elif quota and quota.per_user_cap_milli is not None and total > quota.per_user_cap_milli:
        errors.setdefault("gpu_milli", "")
        errors["gpu_milli"] = errors["gpu_milli"] or (
            f"This asks for {format_milli(total)} GPU of {gpu_class.name}, more than the "
            f"per-user cap of {format_milli(quota.per_user_cap_milli)} GPU in {team}."
        )
    return errors
