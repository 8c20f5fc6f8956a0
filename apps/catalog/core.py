"""Pure rules for the GPU catalog: which parameters each sharing mode takes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

SHARING_WHOLE = "whole"
SHARING_TIMESLICE = "timeslice"
SHARING_MIG = "mig"
SHARING_HAMI = "hami"

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
) -> list[str]:
    """Why a node takes no new placements now, for people; empty when it does. A cordoned or
    NotReady node, one whose health or acceptance check failed, and one in a maintenance
    window take none."""
    reasons: list[str] = []
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
