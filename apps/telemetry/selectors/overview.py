"""Reads of the platform overview for platform admins and team leads, in GPUs: allocation and
utilisation by team and class, who borrows from whom, the queue across teams, idle cost this
week, the busiest and idlest workloads. Leads see the teams they lead; admins every team."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.db.models import F, QuerySet, Sum
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_ids_led_by, teams_led_by
from apps.catalog.models import GpuClass
from apps.quotas import core as quota_core
from apps.quotas.models import TeamQuota
from apps.telemetry.models import UsageDay, WorkloadUsage
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import gpu_class_capacity, quota_usage_for_teams

TOP_WORKLOADS = 5
QUEUE_ROWS = 200


def overview_teams(user: User) -> QuerySet[Team]:
    """The teams whose overview ``user`` may see: every team for the platform roles that
    see spend (admins, auditors, billing), the teams they lead for leads, none for anyone else."""
    if platform_may(user, Act.SEE_SPEND):
        return Team.objects.order_by("name")
    return teams_led_by(user)


def may_see_overview(user: User) -> bool:
    return platform_may(user, Act.SEE_SPEND) or bool(team_ids_led_by(user))


def week_bounds(today: date | None = None) -> tuple[date, date]:
    """[Monday of this week, tomorrow): the days of this week so far, today included."""
    today = today or timezone.now().date()
    return today - timedelta(days=today.weekday()), today + timedelta(days=1)


@dataclass(frozen=True)
class AllocationRow:
    team: Team
    gpu_class: GpuClass
    guaranteed_milli: int
    limit_milli: int
    used_milli: int  # now
    allocated_hours: float  # this week
    used_hours: float

    @property
    def borrowed_milli(self) -> int:
        return max(0, self.used_milli - self.guaranteed_milli)

    @property
    def guaranteed(self) -> float:
        return quota_core.gpus(self.guaranteed_milli)

    @property
    def limit(self) -> float:
        return quota_core.gpus(self.limit_milli)

    @property
    def used(self) -> float:
        return quota_core.gpus(self.used_milli)

    @property
    def borrowed(self) -> float:
        return quota_core.gpus(self.borrowed_milli)

    @property
    def utilisation_percent(self) -> int | None:
        if self.allocated_hours <= 0:
            return None
        return round(100 * self.used_hours / self.allocated_hours)


def _week_hours(
    teams: Iterable[Team], start: date, end: date
) -> dict[tuple[int, int], tuple[float, float, Decimal]]:
    """(team id, class id) → (allocated GPU-h, used GPU-h, cost) for [start, end)."""
    rows = (
        UsageDay.objects.filter(team__in=list(teams), day__gte=start, day__lt=end)
        .values("team_id", "gpu_class_id")
        .annotate(a=Sum("allocated_gpu_seconds"), u=Sum("used_gpu_seconds"), c=Sum("cost"))
        .order_by()
    )
    return {
        (r["team_id"], r["gpu_class_id"]): (
            (r["a"] or 0) / 3600,
            (r["u"] or 0) / 3600,
            Decimal(r["c"] or 0),
        )
        for r in rows
    }


def allocation(teams: Iterable[Team], start: date, end: date) -> list[AllocationRow]:
    """Each quota of the teams: what it guarantees and caps, what is held now, and GPU-hours
    allocated and used in [start, end)."""
    chosen = list(teams)
    hours = _week_hours(chosen, start, end)
    return [
        AllocationRow(
            team=q.team,
            gpu_class=q.gpu_class,
            guaranteed_milli=q.guaranteed_milli,
            limit_milli=q.limit_milli,
            used_milli=q.used_milli,
            allocated_hours=hours.get((q.team.pk, q.gpu_class.pk), (0.0, 0.0, 0))[0],
            used_hours=hours.get((q.team.pk, q.gpu_class.pk), (0.0, 0.0, 0))[1],
        )
        for q in quota_usage_for_teams(chosen)
    ]


@dataclass(frozen=True)
class ClassCapacity:
    gpu_class: GpuClass
    capacity_milli: int
    used_milli: int
    guaranteed_milli: int  # all teams together
    warning: str | None

    @property
    def capacity(self) -> float:
        return quota_core.gpus(self.capacity_milli)

    @property
    def used(self) -> float:
        return quota_core.gpus(self.used_milli)

    @property
    def guaranteed(self) -> float:
        return quota_core.gpus(self.guaranteed_milli)


def capacity_by_class() -> list[ClassCapacity]:
    """Capacity, what is held now and the guarantees of all teams per class, with the warning
    when the guarantees exceed the capacity."""
    guaranteed = dict(
        TeamQuota.objects.values("gpu_class_id")
        .annotate(g=Sum("guaranteed_milli"))
        .values_list("gpu_class_id", "g")
    )
    result = []
    for c in gpu_class_capacity():
        total = int(guaranteed.get(c.gpu_class.pk) or 0)
        result.append(
            ClassCapacity(
                gpu_class=c.gpu_class,
                capacity_milli=c.capacity_milli,
                used_milli=c.used_milli,
                guaranteed_milli=total,
                warning=quota_core.guarantee_overcommit_warning(
                    class_name=c.gpu_class.name,
                    guarantees_milli=[total],
                    capacity_milli=c.capacity_milli,
                ),
            )
        )
    return result


@dataclass(frozen=True)
class Borrow:
    gpu_class: str
    borrower: str
    lender: str  # "" for capacity no team is guaranteed
    milli: int

    @property
    def gpus(self) -> float:
        return quota_core.gpus(self.milli)


def borrowing(teams: Iterable[Team]) -> list[Borrow]:
    """Who borrows from whom, per class, computed over every team (borrowing is cluster-wide)
    and shown where one of ``teams`` borrows or lends."""
    names = {t.name for t in teams}
    everyone = list(Team.objects.all())
    usage = quota_usage_for_teams(everyone)
    capacity = {c.gpu_class.name: c.capacity_milli for c in gpu_class_capacity()}
    by_class: dict[str, tuple[dict[str, int], dict[str, int]]] = defaultdict(lambda: ({}, {}))
    for q in usage:
        guaranteed, used = by_class[q.gpu_class.name]
        guaranteed[q.team.name] = q.guaranteed_milli
        used[q.team.name] = q.used_milli
    result = []
    for class_name, (guaranteed, used) in sorted(by_class.items()):
        pairs = quota_core.borrowing(
            guaranteed=guaranteed, used=used, capacity_milli=capacity.get(class_name, 0)
        )
        for borrower, lender, milli in pairs:
            if borrower in names or lender in names:
                result.append(Borrow(class_name, borrower, lender, milli))
    return result


@dataclass(frozen=True)
class QueueRow:
    workload: Workload

    @property
    def gpus(self) -> float:
        return quota_core.gpus(self.workload.requested_milli)


def queue(teams: Iterable[Team]) -> list[QueueRow]:
    """The teams' waiting workloads across teams, in queue order, with their reasons."""
    rows = (
        Workload.objects.units()
        .select_related("owner", "team", "gpu_class")
        .filter(
            team__in=list(teams),
            state__in=wl.WAITING_STATES | {wl.PREEMPTED},
            deleted_at__isnull=True,
        )
        .order_by(F("queue_position").asc(nulls_last=True), "created_at", "id")[:QUEUE_ROWS]
    )
    return [QueueRow(w) for w in rows]


@dataclass(frozen=True)
class IdleCost:
    team: Team
    allocated_hours: float
    used_hours: float
    cost: Decimal
    idle_cost: Decimal

    @property
    def idle_hours(self) -> float:
        return max(0.0, self.allocated_hours - self.used_hours)


def idle_cost(teams: Iterable[Team], start: date, end: date) -> list[IdleCost]:
    """Per team, what GPU time in [start, end) cost and what part of that paid for idle GPUs
    (each class's cost × its idle share), most idle cost first."""
    chosen = {t.pk: t for t in teams}
    totals: dict[int, list[float | Decimal]] = {}
    for (team_id, _), (allocated, used, cost) in _week_hours(chosen.values(), start, end).items():
        idle_share = Decimal(0)
        if allocated > 0:
            idle_share = Decimal(max(0.0, allocated - used) / allocated)
        row = totals.setdefault(team_id, [0.0, 0.0, Decimal(0), Decimal(0)])
        row[0] = float(row[0]) + allocated
        row[1] = float(row[1]) + used
        row[2] = Decimal(row[2]) + cost
        row[3] = Decimal(row[3]) + cost * idle_share
    result = [
        IdleCost(
            team=chosen[team_id],
            allocated_hours=float(a),
            used_hours=float(u),
            cost=Decimal(c).quantize(Decimal("0.01")),
            idle_cost=Decimal(i).quantize(Decimal("0.01")),
        )
        for team_id, (a, u, c, i) in totals.items()
    ]
    return sorted(result, key=lambda r: (-r.idle_cost, r.team.name))


@dataclass(frozen=True)
class RunningUse:
    workload: Workload
    utilisation: float | None  # 0–1, last cycle
    run_utilisation: float | None  # 0–1, used ÷ allocated over its run so far

    @property
    def gpus(self) -> float:
        return quota_core.gpus(self.workload.total_milli)

    @property
    def percent(self) -> int | None:
        return None if self.utilisation is None else round(100 * self.utilisation)

    @property
    def run_percent(self) -> int | None:
        return None if self.run_utilisation is None else round(100 * self.run_utilisation)


def busiest_and_idlest(
    teams: Iterable[Team], limit: int = TOP_WORKLOADS
) -> tuple[list[RunningUse], list[RunningUse]]:
    """Running workloads of the teams with a measured utilisation: the busiest and the idlest
    (by the last measurement; ties by GPUs held, larger first)."""
    usages = (
        WorkloadUsage.objects.filter(
            workload__team__in=list(teams),
            workload__state=wl.RUNNING,
            last_utilisation__isnull=False,
        )
        .select_related("workload", "workload__team", "workload__owner", "workload__gpu_class")
        .order_by("workload_id")
    )
    rows = [
        RunningUse(
            workload=u.workload,
            utilisation=u.last_utilisation,
            run_utilisation=(
                u.used_gpu_seconds / u.allocated_gpu_seconds if u.allocated_gpu_seconds else None
            ),
        )
        for u in usages
    ]
    busiest = sorted(rows, key=lambda r: (-(r.utilisation or 0.0), -r.workload.total_milli))
    idlest = sorted(rows, key=lambda r: (r.utilisation or 0.0, -r.workload.total_milli))
    return busiest[:limit], idlest[:limit]
