"""Quota grants and reservations in a cycle: the quotas in effect at the snapshot's time. Pure.

During a reservation's window the team's guarantee and limit of the class grow by the amount
reserved: the capacity is held for it (it reclaims what others borrowed there, and its
workloads go first by fair share), and like any guarantee it may be borrowed while the team
leaves it idle. An approved team grant does the same for its period; a grant for one member
raises that member's cap. When either ends, what the team runs above the remaining guarantee
becomes borrowed — preemptible with the usual notice, never stopped on the spot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from apps.quotas.core import Grant, QuotaNumbers, with_grants
from apps.reservations.core import Booking, reserved_by_team_class, with_reserved
from apps.scheduling.data import PRODUCTION, Quota, RunningWorkload, priority_rank


def effective_quotas(
    quotas: Iterable[Quota],
    grants: Sequence[Grant],
    reservations: Iterable[Booking],
    now: datetime,
) -> dict[tuple[str, str], Quota]:
    """Per (team, class): the base quota with the grants and reservations active at ``now``.

    A team with an active reservation but no quota of the class gets one of just that."""
    out: dict[tuple[str, str], Quota] = {}
    for q in quotas:
        numbers = with_grants(
            QuotaNumbers(q.guaranteed_milli, q.limit_milli, q.per_user_cap_milli),
            grants,
            team=q.team,
            gpu_class=q.gpu_class,
            now=now,
        )
        out[(q.team, q.gpu_class)] = Quota(
            q.team,
            q.gpu_class,
            numbers.guaranteed_milli,
            numbers.limit_milli,
            numbers.per_user_cap_milli,
        )
    for (team, gpu_class), reserved in reserved_by_team_class(reservations, now=now).items():
        held = out.get((team, gpu_class))
        base = (
            None
            if held is None
            else QuotaNumbers(held.guaranteed_milli, held.limit_milli, held.per_user_cap_milli)
        )
        grown = with_reserved(base, reserved)
        assert grown is not None  # something is reserved
        out[(team, gpu_class)] = Quota(
            team,
            gpu_class,
            grown.guaranteed_milli,
            grown.limit_milli,
            grown.per_user_cap_milli,
        )
    return out


def user_cap(
    quota: Quota | None, grants: Sequence[Grant], *, owner: str, now: datetime
) -> int | None:
    """The per-user cap of ``owner`` in effect (None: no cap)."""
    if quota is None or quota.per_user_cap_milli is None:
        return None
    mine = sum(
        g.amount_milli
        for g in grants
        if g.user == owner
        and g.team == quota.team
        and g.gpu_class == quota.gpu_class
        and g.active(now)
    )
    return min(quota.limit_milli, quota.per_user_cap_milli + mine)


def over_guarantee(
    running: Iterable[RunningWorkload], quotas: Mapping[tuple[str, str], Quota]
) -> set[int]:
    """Running workloads counted within their team's guarantee that no longer fit in it (a
    grant or reservation ended, a quota shrank): the newest of the lowest class first become
    borrowed until the rest fit. Production is never borrowed."""
    within: dict[tuple[str, str], list[RunningWorkload]] = defaultdict(list)
    for r in running:
        if not r.borrowed:
            within[(r.team, r.gpu_class)].append(r)
    out: set[int] = set()
    for key, rows in within.items():
        quota = quotas.get(key)
        guaranteed = quota.guaranteed_milli if quota else 0
        total = sum(r.total_milli for r in rows)
        newest_lowest = sorted(
            rows, key=lambda r: (-priority_rank(r.priority), -r.admitted_at.timestamp(), -r.id)
        )
        for r in newest_lowest:
            if total <= guaranteed:
                break
            if r.priority == PRODUCTION:
                continue
            out.add(r.id)
            total -= r.total_milli
    return out
