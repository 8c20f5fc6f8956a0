from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from apps.accounts.models import Team
from apps.budgets import core
from apps.budgets.models import Budget, BudgetSpend


def this_month() -> date:
    return core.month_start(timezone.now().date())


def budget_for(team: Team, month: date) -> Budget | None:
    """The budget that governs ``month``: that month's own, else the latest before it."""
    return Budget.objects.filter(team=team, month__lte=month).order_by("-month").first()


def spend_for(team: Team, month: date) -> BudgetSpend | None:
    return BudgetSpend.objects.filter(team=team, month=month).first()


def budget_state(team: Team, month: date | None = None) -> core.BudgetState | None:
    """The team's budget for the month (default: this one) and the spend last recorded; None
    when the team has no budget. Two small queries."""
    month = month or this_month()
    budget = budget_for(team, month)
    if budget is None:
        return None
    spend = spend_for(team, month)
    return core.BudgetState(
        team=team.name,
        month=core.month_label(month),
        amount=budget.amount,
        spent=spend.spent if spend else Decimal(0),
        run_rate_per_hour=spend.run_rate_per_hour if spend else Decimal(0),
        hard_stop=budget.hard_stop,
        stop_lifted=budget.stop_lifted_month == month,
        currency=settings.PLATFORM_CURRENCY,
        thresholds=tuple(budget.thresholds or ()),
    )


def teams_with_budgets() -> list[Team]:
    return list(Team.objects.filter(budgets__isnull=False).distinct().order_by("name"))


@dataclass(frozen=True)
class BudgetReport:
    """A team's budget for a month as pages show it: the state and the month's forecast."""

    team: Team
    state: core.BudgetState
    forecast: Decimal  # at the month's end if the current run rate holds (past months: spent)
    computed_at: datetime | None
    current: bool  # the month is this one

    @property
    def forecast_percent(self) -> int | None:
        return core.percent_of(self.state.amount, self.forecast)

    @property
    def over(self) -> bool:
        return self.forecast > self.state.amount


def budget_report(
    team: Team, month: date | None = None, *, now: datetime | None = None
) -> BudgetReport | None:
    moment = now or timezone.now()
    first = core.month_start(month or moment.date())
    state = budget_state(team, first)
    if state is None:
        return None
    current = first == core.month_start(moment.date())
    end = datetime.combine(core.next_month(first), time.min, tzinfo=UTC)
    forecast = (
        core.forecast(
            spent=state.spent, run_rate_per_hour=state.run_rate_per_hour, now=moment, end=end
        )
        if current
        else state.spent
    )
    spend = spend_for(team, first)
    return BudgetReport(
        team=team,
        state=state,
        forecast=forecast,
        computed_at=spend.computed_at if spend else None,
        current=current,
    )


def budget_reports(teams: list[Team], month: date | None = None) -> list[BudgetReport]:
    return [r for t in teams if (r := budget_report(t, month)) is not None]
