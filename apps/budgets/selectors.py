from __future__ import annotations

from datetime import date
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
