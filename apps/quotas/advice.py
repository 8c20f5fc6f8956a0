"""Right-sizing advice: a guarantee and a limit per team and GPU class from measured usage over
a window. Pure, on plain data (milli-GPU; hours as integers from the window's start).

Evidence per team and class: GPU-hours allocated and used, the 95th percentile of GPUs in use
at once (hourly), the 95th percentile and the peak of GPUs allocated at once. The suggested
guarantee covers what the team *uses* 95 % of the time (rounded up to a step); the suggested
limit lets it burst to what it *held* 95 % of the time plus headroom, and never below the
guarantee. Too little history gives no suggestion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MILLI = 1000
PERCENTILE = 95
LIMIT_HEADROOM = 1.25  # the limit leaves a quarter more than the 95th percentile held
MIN_HOURS = 24  # hours with something allocated before a suggestion is made


@dataclass(frozen=True)
class Interval:
    """A workload holding ``milli`` from hour ``start`` to hour ``end`` (end exclusive, hours
    since the window's start; clipped to the window), with the share of it used per day
    (day index → 0–1; a day without a measurement counts as used in full: no evidence of
    idleness)."""

    start: float
    end: float
    milli: int
    used_share: Mapping[int, float]


def hourly_load(intervals: Sequence[Interval], hours: int) -> tuple[list[float], list[float]]:
    """Milli-GPU allocated and used in each hour of the window (time-weighted averages)."""
    allocated = [0.0] * hours
    used = [0.0] * hours
    for it in intervals:
        first = max(0, math.floor(it.start))
        last = min(hours, math.ceil(it.end))
        for h in range(first, last):
            overlap = min(it.end, h + 1) - max(it.start, h)
            if overlap <= 0:
                continue
            share = it.used_share.get(h // 24, 1.0)
            allocated[h] += it.milli * overlap
            used[h] += it.milli * overlap * min(1.0, max(0.0, share))
    return allocated, used


def percentile(values: Sequence[float], p: int = PERCENTILE) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def round_up(milli: float, step: int) -> int:
    return int(math.ceil(milli / step - 1e-9) * step) if milli > 0 else 0


@dataclass(frozen=True)
class Evidence:
    hours: int  # hours in the window
    active_hours: int  # hours with something allocated
    allocated_gpu_hours: float
    used_gpu_hours: float
    p95_used_milli: int
    p95_allocated_milli: int
    peak_allocated_milli: int

    @property
    def utilisation(self) -> float | None:
        if self.allocated_gpu_hours <= 0:
            return None
        return self.used_gpu_hours / self.allocated_gpu_hours


@dataclass(frozen=True)
class Advice:
    evidence: Evidence
    current_guaranteed_milli: int
    current_limit_milli: int
    guaranteed_milli: int | None  # None: not enough history to suggest anything
    limit_milli: int | None
    reason: str

    @property
    def changes(self) -> bool:
        return self.guaranteed_milli is not None and (
            self.guaranteed_milli != self.current_guaranteed_milli
            or self.limit_milli != self.current_limit_milli
        )


def gpus(milli: float) -> str:
    value = round(milli / MILLI, 3)
    return f"{value:g}"


def advise(
    *,
    allocated: Sequence[float],
    used: Sequence[float],
    current_guaranteed_milli: int,
    current_limit_milli: int,
    step_milli: int = MILLI,
    min_hours: int = MIN_HOURS,
) -> Advice:
    """A suggested guarantee and limit from hourly milli-GPU allocated and used."""
    active = [i for i, a in enumerate(allocated) if a > 0]
    evidence = Evidence(
        hours=len(allocated),
        active_hours=len(active),
        allocated_gpu_hours=round(sum(allocated) / MILLI, 3),
        used_gpu_hours=round(sum(used) / MILLI, 3),
        p95_used_milli=round(percentile(used)),
        p95_allocated_milli=round(percentile(allocated)),
        peak_allocated_milli=round(max(allocated, default=0.0)),
    )
    if len(active) < min_hours:
        return Advice(
            evidence,
            current_guaranteed_milli,
            current_limit_milli,
            None,
            None,
            f"Only {len(active)} h with GPUs allocated in the window; at least {min_hours} h "
            "are needed for a suggestion.",
        )
    guaranteed = round_up(percentile(used), step_milli)
    limit = max(guaranteed, round_up(percentile(allocated) * LIMIT_HEADROOM, step_milli))
    reason = (
        f"95 % of the time at most {gpus(evidence.p95_used_milli)} GPU were in use "
        f"(guarantee {gpus(guaranteed)}); 95 % of the time at most "
        f"{gpus(evidence.p95_allocated_milli)} GPU were held, peak "
        f"{gpus(evidence.peak_allocated_milli)} (limit {gpus(limit)} with a quarter headroom)."
    )
    return Advice(
        evidence, current_guaranteed_milli, current_limit_milli, guaranteed, limit, reason
    )
