"""Burst clusters on plain data: which waiting workloads may burst this cycle, and what
bursting costs, told before (on the waiting workload's advice) and after (on its admission).

A hub or spoke cluster serves every request. A burst cluster takes a request only when it
could not start on the others within its priority class's burst wait, and its team may burst;
it never takes work by preemption. Prices are per GPU-hour: the burst cluster's own, or the
class's where the cluster sets none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from apps.scheduling.data import CycleResult, Snapshot, WaitingWorkload


@dataclass(frozen=True)
class BurstTerms:
    """What the scheduler needs to know about bursting, read once per cycle."""

    clusters: Mapping[str, Decimal | None]  # burst cluster → its GPU-hour price (None: class's)
    class_prices: Mapping[str, Decimal]  # GPU class → its GPU-hour price
    teams: frozenset[str]  # teams that may burst
    waits: Mapping[str, int]  # priority class → seconds to wait first
    capacity: Mapping[str, frozenset[str]]  # GPU class → burst clusters with its nodes


def eligible_at(w: WaitingWorkload, terms: BurstTerms) -> datetime | None:
    """When ``w`` may burst, or None if it never may (its team may not, or no burst cluster has
    nodes of its class)."""
    if w.team not in terms.teams or not terms.capacity.get(w.gpu_class):
        return None
    wait = terms.waits.get(w.priority, max(terms.waits.values(), default=0))
    return w.submitted_at + timedelta(seconds=wait)


def may_burst(waiting: tuple[WaitingWorkload, ...], terms: BurstTerms, now: datetime) -> set[int]:
    allowed = set()
    for w in waiting:
        when = eligible_at(w, terms)
        if when is not None and when <= now:
            allowed.add(w.id)
    return allowed


def hourly(gpus: Decimal, price: Decimal) -> Decimal:
    return (gpus * price).quantize(Decimal("0.01"))


def _gpus(w: WaitingWorkload) -> Decimal:
    return Decimal(w.total_milli) / Decimal(1000)


def _price(cluster: str, gpu_class: str, terms: BurstTerms) -> Decimal:
    own = terms.clusters.get(cluster)
    return own if own is not None else terms.class_prices.get(gpu_class, Decimal(0))


def annotate(result: CycleResult, snapshot: Snapshot, terms: BurstTerms) -> CycleResult:
    """The cycle's result with the burst's cost told: on admissions to a burst cluster (the
    price per hour there, and here), and as advice for waiting work that may burst later."""
    if not terms.clusters:
        return result
    waiting = {w.id: w for w in snapshot.waiting}
    admissions = []
    for a in result.admissions:
        w = waiting.get(a.workload_id)
        if w is not None and a.placement.cluster in terms.clusters:
            gpus = _gpus(w)
            there = hourly(gpus, _price(a.placement.cluster, w.gpu_class, terms))
            home = hourly(gpus, terms.class_prices.get(w.gpu_class, Decimal(0)))
            a = replace(
                a,
                reason=(
                    f"{a.reason} On burst cluster {a.placement.cluster}: it did not start on the "
                    f"hub and spoke clusters within its class's wait. It costs {there} per hour "
                    f"there ({home} per hour on the hub and spoke clusters)."
                ),
            )
        admissions.append(a)
    told = []
    for info in result.waiting:
        w = waiting.get(info.workload_id)
        when = eligible_at(w, terms) if w is not None else None
        if w is not None and when is not None:
            gpus = _gpus(w)
            offers = sorted(
                (hourly(gpus, _price(c, w.gpu_class, terms)), c)
                for c in terms.capacity.get(w.gpu_class, ())
            )
            cost, cluster = offers[0]
            home = hourly(gpus, terms.class_prices.get(w.gpu_class, Decimal(0)))
            start = "now" if when <= snapshot.now else f"from {when:%Y-%m-%d %H:%M} UTC"
            note = (
                f"May run on burst cluster {cluster} {start} if it has not started: "
                f"{cost} per hour there ({home} per hour on the hub and spoke clusters)."
            )
            info = replace(info, advice=(*info.advice, note))
        told.append(info)
    return replace(result, admissions=tuple(admissions), waiting=tuple(told))
