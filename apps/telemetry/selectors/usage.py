"""Usage reads from the accounting tables: rollups per team, user and class over a month,
chargeback, the idle list and notices, GPU time reclaimed, the teams idling most."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.common.parsing import parse_month
from apps.telemetry.models import IdleNotice, UsageDay, WorkloadUsage
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import workloads_visible_to


def month_bounds(month: str | None, today: date | None = None) -> tuple[date, date]:
    """[first day, first day of next month) of ``YYYY-MM`` (default: this month). Raises
    ValueError, with a message for people, for anything else (``parse_month``)."""
    today = today or timezone.now().date()
    first = parse_month(month) if month else today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return first, following


# --- usage over time ---------------------------------------------------------------------


@dataclass
class UsageSeries:
    days: list[date]
    classes: list[str]
    allocated: dict[str, list[float]]  # class → GPU-hours per day
    used: dict[str, list[float]]

    def chart(self) -> dict[str, Any]:
        epoch = [
            int(datetime.combine(d, datetime.min.time(), tzinfo=UTC).timestamp()) for d in self.days
        ]
        return {
            "x": epoch,
            "series": [
                {"label": f"{c} allocated", "values": self.allocated[c]} for c in self.classes
            ]
            + [{"label": f"{c} used", "values": self.used[c]} for c in self.classes],
        }


def usage_series(rows: QuerySet[UsageDay], start: date, end: date) -> UsageSeries:
    """GPU-hours allocated and used per day and GPU class, for [start, end)."""
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    position = {d: i for i, d in enumerate(days)}
    allocated: dict[str, list[float]] = {}
    used: dict[str, list[float]] = {}
    aggregated = (
        rows.filter(day__gte=start, day__lt=end)
        .values("day", "gpu_class__name")
        .annotate(a=Sum("allocated_gpu_seconds"), u=Sum("used_gpu_seconds"))
        .order_by()
    )
    for row in aggregated:
        name = row["gpu_class__name"]
        if name not in allocated:
            allocated[name] = [0.0] * len(days)
            used[name] = [0.0] * len(days)
        i = position[row["day"]]
        allocated[name][i] = round((row["a"] or 0) / 3600, 3)
        used[name][i] = round((row["u"] or 0) / 3600, 3)
    classes = sorted(allocated)
    return UsageSeries(days, classes, allocated, used)


@dataclass
class UsageTotal:
    key: str
    allocated_hours: float
    used_hours: float
    cost: Decimal
    label: str = ""
    gpu_class: str = ""
    team: str = ""
    unmeasured_hours: float = 0.0  # allocated without a measurement: no data
    # The grouped values themselves (team, user, class …): names may hold the key's "/".
    parts: tuple[str, ...] = ()

    @property
    def measured_hours(self) -> float:
        return max(0.0, self.allocated_hours - self.unmeasured_hours)

    @property
    def utilisation(self) -> float | None:
        """Used ÷ measured: hours without data are neither used nor idle; None without any."""
        measured = self.measured_hours
        return self.used_hours / measured if measured > 1e-9 else None


def usage_totals(
    rows: QuerySet[UsageDay], group: Sequence[str], start: date, end: date
) -> list[UsageTotal]:
    aggregated = (
        rows.filter(day__gte=start, day__lt=end)
        .values(*group)
        .annotate(
            a=Sum("allocated_gpu_seconds"),
            u=Sum("used_gpu_seconds"),
            n=Sum("unmeasured_gpu_seconds"),
            c=Sum("cost"),
        )
        .order_by(*group)
    )
    totals = []
    for row in aggregated:
        totals.append(
            UsageTotal(
                key="/".join(str(row[g]) for g in group),
                allocated_hours=(row["a"] or 0) / 3600,
                used_hours=(row["u"] or 0) / 3600,
                unmeasured_hours=(row["n"] or 0) / 3600,
                cost=Decimal(row["c"] or 0),
                label=str(row.get("owner__username", "")),
                gpu_class=str(row.get("gpu_class__name", "")),
                team=str(row.get("team__name", "")),
                parts=tuple(str(row[g]) for g in group),
            )
        )
    return totals


def team_rows(team: Team) -> QuerySet[UsageDay]:
    return UsageDay.objects.filter(team=team)


def user_rows(user: User) -> QuerySet[UsageDay]:
    return UsageDay.objects.filter(owner=user)


CHARGEBACK_GROUP = ("team__name", "owner__username", "gpu_class__name")


def chargeback(teams: Iterable[Team], start: date, end: date) -> list[UsageTotal]:
    rows = UsageDay.objects.filter(team__in=list(teams))
    return usage_totals(rows, CHARGEBACK_GROUP, start, end)


# --- idle --------------------------------------------------------------------------------


def idle_workloads(user: User) -> QuerySet[Workload]:
    """Running workloads the user may see whose GPUs are idle now (longest idle first)."""
    return (
        workloads_visible_to(user)
        .filter(state=wl.RUNNING, usage__idle_since__isnull=False)
        .select_related("usage")
        .order_by("usage__idle_since")
    )


def open_notices_for(user: User) -> QuerySet[IdleNotice]:
    """Warnings and suspensions of the user's own workloads that still stand."""
    return (
        IdleNotice.objects.filter(workload__owner=user, resolved_at__isnull=True)
        .exclude(kind=IdleNotice.Kind.FLAGGED, workload__state__in=wl.TERMINAL_STATES)
        .select_related("workload")
    )


@dataclass
class Reclaimed:
    suspensions: int
    gpu_hours: float


def reclaimed(since: datetime | None = None, now: datetime | None = None) -> Reclaimed:
    """GPU-hours given back by idle suspensions (until resumed, or until now).

    With ``since`` the figure is the window's: every suspension in force at some moment
    after ``since`` counts, with only its hours after ``since``.
    """
    moment = now or timezone.now()
    notices = IdleNotice.objects.filter(kind=IdleNotice.Kind.SUSPENDED, created_at__lte=moment)
    if since is not None:
        notices = notices.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=since))
    total = sum(
        n.reclaimed_gpu_seconds(moment, since=since)
        for n in notices.only("kind", "created_at", "resolved_at", "allocated_gpus")
    )
    return Reclaimed(notices.count(), total / 3600)


def usage_of(workload: Workload) -> WorkloadUsage | None:
    return WorkloadUsage.objects.filter(workload=workload).first()


def top_idle_cost(start: date, end: date, limit: int = 10) -> list[dict[str, Any]]:
    """Teams by GPU-hours measured but not used, for the admin's headline (hours without
    data are not idle)."""
    return list(
        UsageDay.objects.filter(day__gte=start, day__lt=end)
        .values("team__name")
        .annotate(
            idle=Sum(
                F("allocated_gpu_seconds") - F("unmeasured_gpu_seconds") - F("used_gpu_seconds")
            )
            / 3600
        )
        .order_by("-idle")[:limit]
    )
