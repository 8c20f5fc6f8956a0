"""Who may be preempted for whom, and the cheapest legal set. Pure.

DESIGN.md: within a team, a strictly higher class preempts a lower one (production never
yields); across teams only reclaim — a team below its guarantee may preempt *borrowed*
workloads of other teams, never production. A workload may be preempted only after the
minimum runtime of its class, so it is not preempted again and again before making
progress. The cheapest set: lowest class first, fewest GPU-hours lost, newest first; then
every victim that is not needed after all is spared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from apps.scheduling.data import (
    PRODUCTION,
    RULE_PRIORITY,
    RULE_RECLAIM,
    Policy,
    RunningWorkload,
    WaitingWorkload,
    priority_rank,
)
from apps.workloads.core import may_preempt as may_preempt_within_team


def past_minimum_runtime(victim: RunningWorkload, *, now: datetime, policy: Policy) -> bool:
    minimum = policy.min_runtime_seconds.get(victim.priority, 0)
    return (now - victim.admitted_at).total_seconds() >= minimum


def legal_rule(
    workload: WaitingWorkload,
    victim: RunningWorkload,
    *,
    reclaiming: bool,
    now: datetime,
    policy: Policy,
) -> str | None:
    """The rule that allows preempting ``victim`` for ``workload``, or None."""
    if victim.gpu_class != workload.gpu_class or victim.priority == PRODUCTION:
        return None
    if not past_minimum_runtime(victim, now=now, policy=policy):
        return None
    if victim.team == workload.team:
        if may_preempt_within_team(workload.priority, victim.priority):
            return RULE_PRIORITY
        return None
    if reclaiming and victim.borrowed:
        return RULE_RECLAIM
    return None


def gpu_hours_lost(victim: RunningWorkload, now: datetime) -> float:
    hours = max(0.0, (now - victim.admitted_at).total_seconds()) / 3600
    return victim.total_milli / 1000 * hours


def cost_order(victims: Sequence[RunningWorkload], now: datetime) -> list[RunningWorkload]:
    """Cheapest first: lowest class, fewest GPU-hours lost, newest, then by id."""
    return sorted(
        victims,
        key=lambda v: (
            -priority_rank(v.priority),
            gpu_hours_lost(v, now),
            -v.admitted_at.timestamp(),
            -v.id,
        ),
    )


def cheapest_set(
    candidates: Sequence[RunningWorkload],
    fits: Callable[[Sequence[RunningWorkload]], bool],
    now: datetime,
) -> list[RunningWorkload] | None:
    """Add candidates cheapest first until ``fits``; then drop the ones not needed.

    ``fits(victims)`` answers whether the workload could be admitted with ``victims`` gone.
    """
    chosen: list[RunningWorkload] = []
    for victim in cost_order(candidates, now):
        chosen.append(victim)
        if fits(chosen):
            break
    else:
        return None
    # Spare the dearest victims first if the others suffice.
    for victim in reversed(list(chosen)):
        rest = [v for v in chosen if v.id != victim.id]
        if rest and fits(rest):
            chosen = rest
    return chosen
