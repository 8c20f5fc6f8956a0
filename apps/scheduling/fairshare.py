"""Fair share: the order in which waiting workloads are considered. Pure.

Order by priority class, then by the team's fair-share ratio in the GPU class — usage ÷
guarantee, lowest first — then by age. Usage is the current allocation plus a decayed
average of past allocation, so a team that used a lot yesterday does not starve the
others today, and one that used a lot in the last hour waits behind those that did not.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from apps.scheduling.data import priority_rank

# A team without a guarantee in a class sorts after every team that has one.
NO_GUARANTEE = 1e12


@dataclass(frozen=True)
class UsageInterval:
    """``milli`` of ``gpu_class`` held by ``team`` from ``start`` to ``end`` (None: still)."""

    team: str
    gpu_class: str
    milli: int
    start: datetime
    end: datetime | None = None


def decayed_usage(
    intervals: Iterable[UsageInterval], *, now: datetime, half_life_seconds: float
) -> dict[tuple[str, str], float]:
    """Exponentially weighted average allocation (milli-GPU) per (team, class).

    Weight of an instant τ seconds ago: λ·e^(−λτ), λ = ln 2 / half-life, so the weights
    integrate to one and a team that always held M milli has an average of M. An interval
    from τ_start to τ_end seconds ago contributes M·(e^(−λ·τ_end) − e^(−λ·τ_start)).
    """
    rate = math.log(2) / max(1.0, half_life_seconds)
    out: dict[tuple[str, str], float] = defaultdict(float)
    for interval in intervals:
        end = interval.end if interval.end is not None and interval.end < now else now
        if end <= interval.start:
            continue
        ago_end = (now - end).total_seconds()
        ago_start = (now - interval.start).total_seconds()
        share = math.exp(-rate * ago_end) - math.exp(-rate * ago_start)
        out[(interval.team, interval.gpu_class)] += interval.milli * share
    return dict(out)


def share_ratio(usage_milli: float, guaranteed_milli: int) -> float:
    if guaranteed_milli <= 0:
        return NO_GUARANTEE + usage_milli
    return usage_milli / guaranteed_milli


def order_key(
    *, priority: str, ratio: float, submitted_at: datetime, workload_id: int
) -> tuple[int, float, float, int]:
    return (priority_rank(priority), ratio, submitted_at.timestamp(), workload_id)
