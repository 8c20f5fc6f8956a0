from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_leads, users_who_may
from apps.audit.services import audit_record
from apps.budgets import core
from apps.budgets.models import Budget, BudgetSpend
from apps.budgets.selectors import budget_for
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify

MAX_AMOUNT = Decimal("999999999999.99")
HARD_STOP_NOTE = (
    " The hard stop is on: once the budget is spent, new work is admitted only in the batch "
    "class or with a lead's approval."
)


def _told_of_budgets(team: Team) -> list[User]:
    """Who hears of a team's budget: its leads and the platform admins."""
    return [*team_leads(team.pk), *users_who_may(Act.MANAGE_BILLING)]


def budget_set(
    *,
    actor: User,
    team: Team,
    month: date,
    amount: Decimal,
    thresholds: Sequence[int] = core.DEFAULT_THRESHOLDS,
    hard_stop: bool = False,
    source_ip: str | None = None,
) -> Budget:
    """Set the team's budget from ``month`` on (platform admins; audited)."""
    if not platform_may(actor, Act.MANAGE_BILLING):
        raise PermissionDenied("Only platform admins and billing set budgets.")
    errors: dict[str, str] = {}
    if not isinstance(amount, Decimal) or not amount.is_finite() or not 0 <= amount <= MAX_AMOUNT:
        errors["amount"] = "The amount is a number from 0 to 999,999,999,999.99."
    elif amount != amount.quantize(core.CENT):
        errors["amount"] = "The amount has at most two decimal places."
    problem = core.threshold_errors(list(thresholds))
    if problem:
        errors["thresholds"] = problem
    if errors:
        raise ValidationError(errors)
    first = core.month_start(month)
    with transaction.atomic():
        budget, created = Budget.objects.select_for_update().get_or_create(
            team=team, month=first, defaults={"amount": amount}
        )
        before = (
            None
            if created
            else {
                "amount": str(budget.amount),
                "thresholds": budget.thresholds,
                "hard_stop": budget.hard_stop,
            }
        )
        budget.amount = amount
        budget.thresholds = sorted(thresholds)
        budget.hard_stop = hard_stop
        budget.updated_at = timezone.now()
        budget.updated_by = actor
        budget.save()
        audit_record(
            actor=actor,
            action="budget.create" if created else "budget.update",
            obj=budget,
            source_ip=source_ip,
            details={
                "team": team.slug,
                "month": core.month_label(first),
                "before": before,
                "after": {
                    "amount": str(amount),
                    "thresholds": budget.thresholds,
                    "hard_stop": hard_stop,
                },
            },
        )
    return budget


def budget_stop_lift(
    *, actor: User, team: Team, month: date, source_ip: str | None = None
) -> Budget:
    """A lead approves more work for the month despite the hard stop (audited)."""
    if not is_team_lead(actor, team.pk):
        raise PermissionDenied("Only a lead of the team (or a platform admin) approves this.")
    first = core.month_start(month)
    with transaction.atomic():
        budget = budget_for(team, first)
        if budget is None:
            raise ValidationError("The team has no budget for this month.")
        budget = Budget.objects.select_for_update().get(pk=budget.pk)
        budget.stop_lifted_month = first
        budget.stop_lifted_by = actor
        budget.save(update_fields=["stop_lifted_month", "stop_lifted_by"])
        audit_record(
            actor=actor,
            action="budget.stop_lift",
            obj=budget,
            source_ip=source_ip,
            details={"team": team.slug, "month": core.month_label(first)},
        )
    return budget


def budget_spend_record(
    *, team: Team, month: date, spent: Decimal, run_rate_per_hour: Decimal, now: datetime
) -> list[int]:
    """Keep what the team spent this month and its run rate (telemetry's periodic pass), and
    announce thresholds newly reached to the team's leads and the platform admins, once each.
    Returns the thresholds announced now."""
    first = core.month_start(month)
    with transaction.atomic():
        spend, _ = BudgetSpend.objects.select_for_update().get_or_create(team=team, month=first)
        spend.spent = spent.quantize(core.CENT)
        spend.run_rate_per_hour = run_rate_per_hour.quantize(Decimal("0.0001"))
        spend.computed_at = now
        budget = budget_for(team, first)
        new: list[int] = []
        if budget is not None:
            new = core.crossed(
                amount=budget.amount,
                spent=spend.spent,
                thresholds=budget.thresholds or (),
                already=spend.notified or (),
            )
        spend.notified = sorted({*(spend.notified or ()), *new})
        spend.save()
        for threshold in new:
            assert budget is not None
            _announce(team=team, budget=budget, spend=spend, threshold=threshold, month=first)
        if budget is not None and settings.BUDGET_FORECAST_WARNINGS:
            _warn_on_forecast(team=team, budget=budget, spend=spend, month=first, now=now)
    return new


def _warn_on_forecast(
    *, team: Team, budget: Budget, spend: BudgetSpend, month: date, now: datetime
) -> None:
    """The month's forecast reaches a threshold the spend has not: told once per threshold to
    the team's leads and the platform admins (the key names the team, month and threshold), so
    they can act before the money is spent."""
    end = datetime.combine(core.next_month(month), time.min, tzinfo=UTC)
    expected = core.forecast(
        spent=spend.spent, run_rate_per_hour=spend.run_rate_per_hour, now=now, end=end
    )
    threshold = core.forecast_warning(
        amount=budget.amount,
        spent=spend.spent,
        forecast=expected,
        thresholds=budget.thresholds or (),
    )
    if threshold is None:
        return
    label = core.month_label(month)
    currency = settings.PLATFORM_CURRENCY
    people = _told_of_budgets(team)
    notify(
        event=NoticeEvent.BUDGET_THRESHOLD,
        users=people,
        title=f"{team.name} is on course to spend {threshold}% of its budget for {label}",
        body=(
            f"At the current rate of {core.money(spend.run_rate_per_hour, currency)} an hour, "
            f"{team.name} will have spent {core.money(expected, currency)} by the end of "
            f"{label}, against a budget of {core.money(budget.amount, currency)} "
            f"({core.money(spend.spent, currency)} spent so far)."
            + (HARD_STOP_NOTE if budget.hard_stop else "")
        ),
        key=f"budget-forecast:{team.pk}:{label}:{threshold}",
        link=reverse("team-budget", args=[team.slug]),
        team=team,
    )


def _announce(
    *, team: Team, budget: Budget, spend: BudgetSpend, threshold: int, month: date
) -> None:
    """One threshold reached: in the audit trail, and told to the team's leads and the platform
    admins (once each: the key names the team, month and threshold)."""
    label = core.month_label(month)
    currency = settings.PLATFORM_CURRENCY
    people = _told_of_budgets(team)
    notify(
        event=NoticeEvent.BUDGET_THRESHOLD,
        users=people,
        title=f"{team.name} has spent {threshold}% of its budget for {label}",
        body=(
            f"{team.name} has spent {core.money(spend.spent, currency)} of its "
            f"{core.money(budget.amount, currency)} budget for {label}; at the current rate of "
            f"{core.money(spend.run_rate_per_hour, currency)} an hour."
            + (HARD_STOP_NOTE if budget.hard_stop else "")
        ),
        key=f"budget:{team.pk}:{label}:{threshold}",
        link=reverse("team-budget", args=[team.slug]),
        team=team,
    )
    audit_record(
        actor=None,
        action="budget.threshold",
        obj=budget,
        details={
            "team": team.slug,
            "month": core.month_label(month),
            "threshold": threshold,
            "spent": str(spend.spent),
            "amount": str(budget.amount),
        },
    )
