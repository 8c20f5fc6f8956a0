"""Budget spend (a service of the telemetry app, which prices GPU time): month-to-date spend and
the current run rate per team with a budget, written through the budgets app's service, which
keeps them where the request rules read them and announces thresholds reached."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from django.db.models import Sum
from django.utils import timezone

from apps.accounts.models import Team
from apps.budgets import core as budget_core
from apps.budgets.selectors import teams_with_budgets
from apps.budgets.services import budget_spend_record
from apps.telemetry.models import UsageDay
from apps.workloads import core as wl
from apps.workloads.models import Workload


def month_spend(teams: list[Team], now: datetime) -> dict[int, Decimal]:
    """Team id → what its GPU time cost this month so far (accrued, priced when used)."""
    first = budget_core.month_start(now.date())
    rows = (
        UsageDay.objects.filter(
            team__in=teams, day__gte=first, day__lt=budget_core.next_month(first)
        )
        .values("team_id")
        .annotate(c=Sum("cost"))
        .values_list("team_id", "c")
    )
    return {team_id: Decimal(cost or 0) for team_id, cost in rows}


def run_rates(teams: list[Team]) -> dict[int, Decimal]:
    """Team id → what its admitted and running work costs per hour now (what the cluster grants
    it × each class's hourly cost)."""
    rates: dict[int, Decimal] = defaultdict(Decimal)
    active = (
        Workload.objects.units()
        .filter(team__in=teams, state__in=wl.ACTIVE_STATES)
        .values_list("team_id", "charged_milli", "replicas", "gpu_class__hourly_cost")
    )
    for team_id, milli, replicas, hourly in active:
        rates[team_id] += Decimal(milli * replicas) / 1000 * Decimal(hourly or 0)
    return dict(rates)


def budget_spend_refresh(*, now: datetime | None = None) -> dict[str, list[int]]:
    """Write month-to-date spend and run rate of every team with a budget; team slug → the
    thresholds announced by this pass."""
    moment = now or timezone.now()
    teams = teams_with_budgets()
    spent = month_spend(teams, moment)
    rates = run_rates(teams)
    announced: dict[str, list[int]] = {}
    for team in teams:
        new = budget_spend_record(
            team=team,
            month=moment.date(),
            spent=spent.get(team.pk, Decimal(0)),
            run_rate_per_hour=rates.get(team.pk, Decimal(0)),
            now=moment,
        )
        if new:
            announced[team.slug] = new
    return announced
