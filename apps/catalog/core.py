"""Pure rules for the GPU catalog: which parameters each sharing mode takes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

SHARING_WHOLE = "whole"
SHARING_TIMESLICE = "timeslice"
SHARING_MIG = "mig"
SHARING_HAMI = "hami"

# How a class's GPUs reach a pod: extended resources of NVIDIA's device plugin (nvidia.com/gpu,
# …), or Dynamic Resource Allocation (ResourceClaims allocated from the ResourceSlices NVIDIA's
# DRA driver publishes). Chosen per class by admins; each workload keeps the one it was
# admitted under.
ALLOCATION_DEVICE_PLUGIN = "device_plugin"
ALLOCATION_DRA = "dra"
ALLOCATION_MODES = (ALLOCATION_DEVICE_PLUGIN, ALLOCATION_DRA)

MIB_PER_GIB = 1024


def format_gib(mib: object) -> str:
    """GPU memory in GiB, as the portal and the admin show it, to one decimal where it has
    one: 81920 → "80 GiB", 23034 → "22.5 GiB", 141312 → "138 GiB"; an empty value → "—"."""
    if mib is None or mib == "":
        return "—"
    try:
        value = float(mib) / MIB_PER_GIB  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    return f"{value:,.1f}".removesuffix(".0") + " GiB"


MIG_PROFILE_RE = re.compile(r"^(?P<slices>[1-7])g\.(?P<gb>\d{1,3})gb$")
IMAGE_REF_RE = re.compile(
    r"^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?/)?"  # registry host[:port]/
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)


@dataclass(frozen=True)
class GpuClassSpec:
    """A GPU class as plain data: what the scheduler, the resource mapping and the manifests
    need to know about it (no ORM). The one description of a class outside the database."""

    name: str
    sharing_mode: str
    memory_mib: int
    product_label: str = ""
    timeslice_replicas: int | None = None
    mig_profiles: tuple[str, ...] = ()
    hami_split_count: int | None = None
    enabled: bool = True
    allocation_mode: str = ALLOCATION_DEVICE_PLUGIN


def gpu_class_spec(gpu_class: Any) -> GpuClassSpec:
    """The one way to read a GPU class as plain data: from a catalog row or any object with the
    spec's fields (a class without a product label, such as the request rules' facts, gets "")."""
    return GpuClassSpec(
        name=gpu_class.name,
        sharing_mode=gpu_class.sharing_mode,
        memory_mib=gpu_class.memory_mib,
        product_label=getattr(gpu_class, "product_label", "") or "",
        timeslice_replicas=gpu_class.timeslice_replicas,
        mig_profiles=tuple(gpu_class.mig_profiles or ()),
        hami_split_count=gpu_class.hami_split_count,
        enabled=gpu_class.enabled,
        allocation_mode=getattr(gpu_class, "allocation_mode", "") or ALLOCATION_DEVICE_PLUGIN,
    )


def allocation_mode_error(*, allocation_mode: str, sharing_mode: str) -> str | None:
    """Why a class cannot be allocated this way, or None. HAMi's virtual GPUs come from its own
    device plugin and scheduler extender: NVIDIA's DRA driver does not publish them."""
    if allocation_mode not in ALLOCATION_MODES:
        return f"Unknown allocation mode {allocation_mode!r}."
    if allocation_mode == ALLOCATION_DRA and sharing_mode == SHARING_HAMI:
        return (
            "HAMi virtual GPUs are allocated by HAMi's device plugin; choose whole GPUs, "
            "time-slicing or MIG for Dynamic Resource Allocation."
        )
    return None


def mig_profile_memory_mib(profile: str) -> int | None:
    """Memory of a MIG profile such as ``2g.20gb`` in MiB, or None if it is not a profile."""
    match = MIG_PROFILE_RE.match(profile)
    if not match:
        return None
    return int(match.group("gb")) * 1024


def sharing_params_errors(
    *,
    mode: str,
    memory_mib: int,
    timeslice_replicas: int | None,
    mig_profiles: Sequence[str],
    hami_split_count: int | None,
) -> dict[str, str]:
    """Field → message for every sharing parameter that does not fit ``mode``."""
    errors: dict[str, str] = {}
    if mode == SHARING_TIMESLICE:
        if timeslice_replicas is None or timeslice_replicas < 2:
            errors["timeslice_replicas"] = (
                "Time-slicing needs at least 2 replicas per GPU (GPU Operator 'replicas')."
            )
    elif timeslice_replicas is not None:
        errors["timeslice_replicas"] = "Replicas apply only to the time-slicing sharing mode."

    if mode == SHARING_MIG:
        if not mig_profiles:
            errors["mig_profiles"] = "MIG needs at least one profile, e.g. 1g.10gb."
        else:
            bad = [p for p in mig_profiles if mig_profile_memory_mib(p) is None]
            too_big = [
                p
                for p in mig_profiles
                if (mem := mig_profile_memory_mib(p)) is not None and mem > memory_mib
            ]
            if bad:
                errors["mig_profiles"] = (
                    f"Not MIG profiles: {', '.join(bad)}. Use the form <slices>g.<memory>gb, "
                    "e.g. 1g.10gb or 3g.40gb."
                )
            elif too_big:
                errors["mig_profiles"] = (
                    f"Profiles larger than the GPU's memory: {', '.join(too_big)}."
                )
            elif len(set(mig_profiles)) != len(mig_profiles):
                errors["mig_profiles"] = "Each MIG profile may be listed once."
    elif mig_profiles:
        errors["mig_profiles"] = "MIG profiles apply only to the MIG sharing mode."

    if mode == SHARING_HAMI:
        if hami_split_count is None or hami_split_count < 1:
            errors["hami_split_count"] = (
                "HAMi needs the number of virtual GPUs per physical GPU (deviceSplitCount ≥ 1)."
            )
    elif hami_split_count is not None:
        errors["hami_split_count"] = "The split count applies only to the HAMi sharing mode."
    return errors


def sort_mig_profiles(profiles: Sequence[str]) -> list[str]:
    """Profiles ordered smallest first, the order a fraction → profile mapping searches."""
    return sorted(profiles, key=lambda p: (mig_profile_memory_mib(p) or 0, p))


class MigPartitioned(Protocol):
    """What the MIG mapping reads of a class: a spec, or any object with these attributes."""

    @property
    def memory_mib(self) -> int: ...

    @property
    def mig_profiles(self) -> Sequence[str] | None: ...


def mig_profile_for(gpu_class: MigPartitioned, gpu_milli: int) -> str | None:
    """The smallest offered MIG profile whose memory covers ``gpu_milli`` of the GPU's memory,
    or None when none does. The one fraction → MIG profile mapping."""
    needed = math.ceil(gpu_class.memory_mib * gpu_milli / 1000)
    for profile in sort_mig_profiles(list(gpu_class.mig_profiles or ())):
        if (mig_profile_memory_mib(profile) or 0) >= needed:
            return profile
    return None


def largest_mig_profile(gpu_class: GpuClassSpec) -> str:
    profiles = sort_mig_profiles(gpu_class.mig_profiles)
    return profiles[-1] if profiles else "none"


def image_reference_problem(reference: str) -> str | None:
    if not reference or not IMAGE_REF_RE.match(reference):
        return (
            "Not a container image reference; expected e.g. "
            "registry.example.com/team/pytorch:2.4 or ghcr.io/org/image@sha256:…"
        )
    return None


# --- images on the nodes ------------------------------------------------------------------------

# Whether a catalog image is on a cluster, from the images its nodes report (node.status.images:
# what the kubelet holds, by every name and digest it knows them by).
IMAGE_AVAILABLE = "available"  # on at least one node
IMAGE_MISSING = "missing"  # every node reports its images, and none holds this one
# Some node reports no images at all (simulated nodes) and none holds it: it may be there, so
# this is never a refusal.
IMAGE_UNKNOWN = "unknown"


def reference_keys(reference: str) -> frozenset[str]:
    """The names one image reference is matched by, normalised as container runtimes do:
    ``pytorch/pytorch`` is ``docker.io/pytorch/pytorch:latest``, ``python:3`` is
    ``docker.io/library/python:3``; a digest also matches as ``repo@sha256:…``."""
    text = reference.strip()
    name, _, digest = text.partition("@")
    tag = ""
    if name.rfind(":") > name.rfind("/"):
        name, tag = name.rsplit(":", 1)
    first, slash, rest = name.partition("/")
    if not slash or not ("." in first or ":" in first or first == "localhost"):
        first, rest = "docker.io", name
    if first in ("index.docker.io", "registry-1.docker.io"):
        first = "docker.io"
    if first == "docker.io" and "/" not in rest:
        rest = f"library/{rest}"
    repo = f"{first}/{rest}".lower()
    keys = set()
    if digest:
        keys.add(f"{repo}@{digest}")
    if tag or not digest:
        keys.add(f"{repo}:{tag or 'latest'}")
    return frozenset(keys)


@dataclass(frozen=True)
class NodeImages:
    cluster: str
    node: str
    images: tuple[str, ...]  # as the node reports them; empty: it reports none


@dataclass(frozen=True)
class ImageOnCluster:
    """One catalog image on one cluster."""

    cluster: str
    status: str  # IMAGE_AVAILABLE, IMAGE_MISSING or IMAGE_UNKNOWN
    nodes: int  # the nodes that hold it
    reporting: int  # the nodes that report their images


def images_on_clusters(
    references: dict[str, str], nodes: Sequence[NodeImages]
) -> dict[str, tuple[ImageOnCluster, ...]]:
    """For each catalog image (name → reference), whether each cluster of ``nodes`` holds it,
    by cluster name."""
    clusters = sorted({n.cluster for n in nodes})
    held = {
        (n.cluster, n.node): frozenset().union(*(reference_keys(i) for i in n.images))
        for n in nodes
    }
    found: dict[str, tuple[ImageOnCluster, ...]] = {}
    for name, reference in references.items():
        keys = reference_keys(reference)
        rows = []
        for cluster in clusters:
            mine = [n for n in nodes if n.cluster == cluster]
            reporting = [n for n in mine if n.images]
            holders = sum(1 for n in reporting if keys & held[(n.cluster, n.node)])
            if holders:
                status = IMAGE_AVAILABLE
            else:
                status = IMAGE_MISSING if len(reporting) == len(mine) else IMAGE_UNKNOWN
            rows.append(ImageOnCluster(cluster, status, holders, len(reporting)))
        found[name] = tuple(rows)
    return found


# --- nodes that take no new work ---------------------------------------------------------

HEALTH_FAILED = "failed"


@dataclass(frozen=True)
class MaintenanceWindow:
    starts_at: datetime
    ends_at: datetime
    reason: str
    drain: bool = True


def node_blockers(
    *,
    schedulable: bool,
    ready: bool,
    health_verdict: str,
    health_problems: Sequence[str],
    windows: Sequence[MaintenanceWindow],
    now: datetime,
    dra_unpublished: bool = False,
) -> list[str]:
    """Why a node takes no new placements now, for people; empty when it does. A cordoned or
    NotReady node, one whose health or acceptance check failed, one in a maintenance window,
    and one of a class allocated through DRA that publishes no devices take none."""
    reasons: list[str] = []
    if dra_unpublished:
        reasons.append(
            "Publishes no GPUs through DRA (no ResourceSlices of NVIDIA's DRA driver), and its "
            "class allocates through DRA."
        )
    if not schedulable:
        reasons.append("Cordoned in the cluster (spec.unschedulable).")
    if not ready:
        reasons.append("NotReady: the kubelet does not report the node Ready.")
    if health_verdict == HEALTH_FAILED:
        detail = "; ".join(str(p) for p in health_problems[:3]) or "no detail"
        reasons.append(f"Health check failed: {detail}")
    for window in windows:
        if window.starts_at <= now < window.ends_at:
            action = "draining" if window.drain else "no new work"
            reasons.append(
                f"Maintenance until {window.ends_at:%Y-%m-%d %H:%M} UTC ({action}): {window.reason}"
            )
    return reasons
