"""A team's policy and what it refuses: pure, on plain data. The request rule set
(``apps.workloads.rules``) asks :func:`policy_problems` at every door, so the portal, the API
and the CLI refuse the same request with the same message, naming the policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KINDS = ("notebook", "training", "sweep")  # apps.workloads.core's submittable kinds
KIND_LABELS = {"notebook": "notebook", "training": "training job", "sweep": "sweep"}
# Sharing modes that put several tenants' processes on one GPU without isolation between them
# (time-slicing, HAMi vGPU); MIG partitions are isolated.
UNISOLATED_SHARING = ("timeslice", "hami")
MILLI = 1000


@dataclass(frozen=True)
class PolicySpec:
    """What a team may ask for. ``None`` or empty: no restriction of that kind."""

    team: str
    allowed_classes: frozenset[str] | None = None
    allowed_images: frozenset[str] | None = None
    max_gpu_milli_per_workload: int | None = None
    max_runtime_seconds: Mapping[str, int] = field(default_factory=dict)  # kind → seconds
    default_idle_timeout_seconds: Mapping[str, int] = field(default_factory=dict)
    # Classes on which the team does not share a GPU with other teams.
    exclusive_classes: frozenset[str] = frozenset()


def duration(seconds: int) -> str:
    """3600 → '1 h', 5400 → '90 min', 172800 → '2 days'."""
    if seconds % 86400 == 0:
        days = seconds // 86400
        return f"{days} day{'s' if days != 1 else ''}"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def gpus(milli: int) -> str:
    whole, frac = divmod(milli, MILLI)
    return str(whole) if not frac else f"{whole}.{frac:03d}".rstrip("0")


def policy_problems(
    policy: PolicySpec,
    *,
    kind: str,
    gpu_class: str,
    sharing_mode: str,
    image: str,
    gpu_milli: int,
    at_once_milli: int | None,
    max_runtime_seconds: int | None,
) -> dict[str, str]:
    """Field → message for each rule of the team's policy the request breaks.

    ``at_once_milli`` is what the workload holds at once (replicas × per replica; a sweep's
    trials that run at once); None when its shape is not known (other rules refuse it)."""
    name = f"{policy.team}'s team policy"
    errors: dict[str, str] = {}
    if policy.allowed_classes is not None and gpu_class not in policy.allowed_classes:
        allowed = ", ".join(sorted(policy.allowed_classes)) or "none"
        errors["gpu_class"] = (
            f"{name} allows only these GPU classes: {allowed}; {gpu_class} is not one of them."
        )
    if policy.allowed_images is not None and image not in policy.allowed_images:
        allowed = ", ".join(sorted(policy.allowed_images)) or "none"
        errors["image"] = f"{name} allows only these images: {allowed}; {image} is not one of them."
    cap = policy.max_gpu_milli_per_workload
    if cap is not None and at_once_milli is not None and at_once_milli > cap:
        what = "its trials at once" if kind == "sweep" else "it"
        errors["gpu_milli"] = (
            f"{name} allows at most {gpus(cap)} GPU per workload; {what} would hold "
            f"{gpus(at_once_milli)} GPU."
        )
    limit = policy.max_runtime_seconds.get(kind)
    if limit is not None and max_runtime_seconds is not None and max_runtime_seconds > limit:
        errors["max_runtime_seconds"] = (
            f"{name} allows a {KIND_LABELS.get(kind, kind)} to run at most {duration(limit)}; "
            f"ask for {duration(limit)} or less."
        )
    if (
        gpu_class in policy.exclusive_classes
        and sharing_mode in UNISOLATED_SHARING
        and 0 < gpu_milli < MILLI
    ):
        errors.setdefault(
            "gpu_milli",
            f"{name} does not share {gpu_class} GPUs with other teams (its sharing gives no "
            "isolation between tenants): ask for whole GPUs.",
        )
    return errors


def runtime_default(policy: PolicySpec | None, kind: str, asked: int | None) -> int | None:
    """The maximum runtime a request gets: as asked, else the policy's cap for its kind."""
    if asked is not None or policy is None:
        return asked
    return policy.max_runtime_seconds.get(kind)


def idle_timeout_default(policy: PolicySpec | None, kind: str, asked: int | None) -> int | None:
    """The idle timeout a request gets: as asked, else the policy's default for its kind."""
    if asked is not None or policy is None:
        return asked
    return policy.default_idle_timeout_seconds.get(kind)


MAX_SECONDS = 30 * 24 * 3600
MIN_RUNTIME_SECONDS = 60
MIN_IDLE_TIMEOUT_SECONDS = 5 * 60
MAX_GPU_MILLI = 64 * 64 * MILLI


def policy_errors(
    *,
    max_gpu_milli_per_workload: int | None,
    max_runtime_seconds: Mapping[str, int | None],
    idle_timeout_seconds: Mapping[str, int | None],
) -> dict[str, str]:
    """Field → message for numbers a policy cannot hold."""
    errors: dict[str, str] = {}
    cap = max_gpu_milli_per_workload
    if cap is not None and not 1 <= cap <= MAX_GPU_MILLI:
        errors["max_gpu_milli_per_workload"] = (
            f"The maximum per workload is from 0.001 to {gpus(MAX_GPU_MILLI)} GPU, or empty."
        )
    for kind, value in max_runtime_seconds.items():
        if value is not None and not MIN_RUNTIME_SECONDS <= value <= MAX_SECONDS:
            errors[f"max_runtime_{kind}_seconds"] = (
                "A maximum runtime is from 1 minute to 30 days, or empty."
            )
    for kind, value in idle_timeout_seconds.items():
        if value is not None and not MIN_IDLE_TIMEOUT_SECONDS <= value <= MAX_SECONDS:
            errors[f"idle_timeout_{kind}_seconds"] = (
                "An idle timeout is from 5 minutes to 30 days, or empty."
            )
    return errors


def summary(policy: PolicySpec) -> list[str]:
    """The policy in short lines for people (empty: it restricts nothing)."""
    lines = []
    if policy.allowed_classes is not None:
        lines.append(f"GPU classes: {', '.join(sorted(policy.allowed_classes))}")
    if policy.allowed_images is not None:
        lines.append(f"images: {', '.join(sorted(policy.allowed_images))}")
    if policy.max_gpu_milli_per_workload is not None:
        lines.append(f"at most {gpus(policy.max_gpu_milli_per_workload)} GPU per workload")
    for kind, seconds in sorted(policy.max_runtime_seconds.items()):
        lines.append(f"{KIND_LABELS.get(kind, kind)}s run at most {duration(seconds)}")
    for kind, seconds in sorted(policy.default_idle_timeout_seconds.items()):
        lines.append(f"{KIND_LABELS.get(kind, kind)}s idle out after {duration(seconds)}")
    if policy.exclusive_classes:
        lines.append(
            f"no GPU shared with other teams on {', '.join(sorted(policy.exclusive_classes))}"
        )
    return lines
