"""Could any scheduling cycle ever admit the request: the sharing mode, the class's nodes, the
team's limit and the per-user cap. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from apps.catalog import core as catalog_core
from apps.quotas.core import format_milli
from apps.workloads.rules.facts import (
    Context,
    GpuClassFacts,
    NodeFacts,
    charged_milli_of,
    put_problem,
)
from apps.workloads.rules.limits import MILLI


def mig_profile_for(gpu_class: GpuClassFacts, gpu_milli: int) -> str | None:
    """The smallest offered MIG profile whose memory covers the fraction's memory (the one
    mapping, in the catalog)."""
    return catalog_core.mig_profile_for(gpu_class, gpu_milli)


def sharing_problem(gpu_class: GpuClassFacts, gpu_milli: int, hint: str = "") -> str | None:
    """Why the class's sharing mode cannot serve ``gpu_milli`` per replica, if it cannot."""
    mode = gpu_class.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        if gpu_milli % MILLI:
            whole = -(-gpu_milli // MILLI) * MILLI
            return (
                f"{gpu_class.name} gives whole GPUs only; ask for {format_milli(whole)} GPU or "
                f"pick a class that shares GPUs.{hint}"
            )
        return None
    if mode == catalog_core.SHARING_MIG:
        if gpu_milli > MILLI:
            return f"{gpu_class.name} is partitioned with MIG: ask for at most one GPU per replica."
        if mig_profile_for(gpu_class, gpu_milli) is None:
            profiles = catalog_core.sort_mig_profiles(list(gpu_class.mig_profiles or ()))
            return (
                f"No MIG profile of {gpu_class.name} holds {format_milli(gpu_milli)} GPU; the "
                f"largest offered is {profiles[-1] if profiles else 'none'}."
            )
        return None
    if mode in (catalog_core.SHARING_TIMESLICE, catalog_core.SHARING_HAMI):
        return None
    return f"Unknown sharing mode {mode!r} of {gpu_class.name}."


def capacity_problems(
    gpu_milli: int, replicas: int, context: Context, *, gang: bool = False
) -> dict[str, str]:
    """Field → message for each reason no scheduling cycle could ever admit the request: the
    class cannot express the amount, no node could hold one replica, a gang (one replica per
    node, in one cluster) has more replicas than any cluster has nodes for, or it exceeds the
    team's limit or the per-user cap. Without a node inventory the node checks are skipped."""
    hint = (
        f" Classes that share GPUs: {', '.join(sorted(context.sharing_classes))}."
        if context.sharing_classes
        else ""
    )
    problem = sharing_problem(context.gpu_class, gpu_milli, hint)
    if problem:
        return {"gpu_milli": problem}
    errors = _node_problems(gpu_milli, replicas, context, gang=gang)
    _quota_problems(gpu_milli, replicas, context, errors)
    return errors


def _node_problems(
    gpu_milli: int, replicas: int, context: Context, *, gang: bool
) -> dict[str, str]:
    """What no node of the class (none known: nothing said) could give one replica, or a gang."""
    errors: dict[str, str] = {}
    gpu_class = context.gpu_class
    mine = [n for n in context.nodes if n.gpu_count > 0]
    if not mine:
        return errors
    gpus = math.ceil(gpu_milli / MILLI)
    most = max(n.gpu_count for n in mine)
    profile = (
        mig_profile_for(gpu_class, gpu_milli)
        if gpu_class.sharing_mode == catalog_core.SHARING_MIG
        else None
    )
    if gpus > most:
        errors["gpu_milli"] = (
            f"One replica needs {gpus} GPUs on one node, but the largest {gpu_class.name} "
            f"node has {most}. Use more replicas with at most {most} GPUs each."
        )
    elif profile and not any(profile in (n.mig_layout or ()) for n in mine):
        errors["gpu_milli"] = f"No {gpu_class.name} GPU is partitioned with a {profile} instance."
    elif gang:
        put_problem(errors, "replicas", _gang_problem(replicas, gpus, mine, gpu_class.name))
    if context.cpu_milli > max(n.cpu_milli for n in mine):
        errors["cpu_milli"] = (
            f"No {gpu_class.name} node has {context.cpu_milli / 1000:g} CPU cores to give "
            "one replica."
        )
    if context.memory_mib > max(n.memory_mib for n in mine):
        errors["memory_mib"] = (
            f"No {gpu_class.name} node has {context.memory_mib} MiB of memory to give one replica."
        )
    return errors


def _gang_problem(replicas: int, gpus: int, nodes: Sequence[NodeFacts], name: str) -> str | None:
    """A gang runs one replica per node, all at once, in one cluster: enough nodes of one?"""
    per_cluster: dict[Any, int] = {}
    for n in nodes:
        if n.gpu_count >= gpus:
            key = getattr(n, "cluster_id", None)
            per_cluster[key] = per_cluster.get(key, 0) + 1
    room = max(per_cluster.values(), default=0)
    if replicas <= room:
        return None
    return (
        f"A job of {replicas} replicas runs one replica per node, all at once, in "
        f"one cluster; at most {room} {name} nodes of one cluster can hold "
        f"{gpus} GPU{'s' if gpus != 1 else ''} each. Ask for at most {room} "
        "replicas, with more GPUs each."
    )


def _quota_problems(
    gpu_milli: int, replicas: int, context: Context, errors: dict[str, str]
) -> None:
    """What the team's limit or the per-user cap refuses, charged as the cluster grants it."""
    gpu_class = context.gpu_class
    charged = charged_milli_of(gpu_milli, gpu_class)
    total = charged * replicas
    asks = (
        f"This asks for {format_milli(total)} GPU of {gpu_class.name}"
        if charged == gpu_milli
        else f"This is charged {format_milli(total)} GPU of {gpu_class.name} (what the "
        "cluster grants)"
    )
    quota = context.quota
    limit = quota.limit_milli if quota else 0
    if limit <= 0:
        errors["gpu_class"] = (
            f"{context.team} has no quota for {gpu_class.name}; "
            f"{no_quota_advice(admin=context.admin)}."
        )
    elif total > limit:
        put_problem(
            errors,
            "gpu_milli",
            f"{asks}, more than {context.team}'s limit of {format_milli(limit)} GPU.",
        )
    elif quota and quota.per_user_cap_milli is not None and total > quota.per_user_cap_milli:
        put_problem(
            errors,
            "gpu_milli",
            f"{asks}, more than the per-user cap of "
            f"{format_milli(quota.per_user_cap_milli)} GPU in {context.team}.",
        )


def no_quota_advice(*, admin: bool) -> str:
    """Who gives a team quota for a class, as the person asking should read it."""
    if admin:
        return "give it one under Team quotas in the admin"
    return "ask a platform admin for one"
