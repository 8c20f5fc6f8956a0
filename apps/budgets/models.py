from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.budgets import core


def default_thresholds() -> list[int]:
    return list(core.DEFAULT_THRESHOLDS)


class Budget(models.Model):
    """A team's budget from ``month`` on (it carries forward until a later month has its own),
    in the platform currency."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="budgets")
    month = models.DateField(help_text="First day of the month it starts in.")
    amount = models.DecimalField(
        max_digits=14, decimal_places=2, validators=[MinValueValidator(Decimal(0))]
    )
    thresholds = models.JSONField(default=default_thresholds, help_text="Percent of the amount.")
    hard_stop = models.BooleanField(
        default=False,
        help_text="Once spent, admit new work only in the batch class or with a lead's approval.",
    )
    stop_lifted_month = models.DateField(
        null=True, blank=True, help_text="The month a lead approved more work for."
    )
    stop_lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["team__name", "-month"]
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="budget_team_month_unique"),
            models.CheckConstraint(condition=models.Q(amount__gte=0), name="budget_amount_gte_0"),
        ]

    def __str__(self) -> str:
        return f"budget of {self.team} from {core.month_label(self.month)}"


class BudgetSpend(models.Model):
    """What a team spent in a month so far and its current run rate, written by the telemetry's
    periodic pass; the request rules read it (the hard stop) and pages show it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    spent = models.DecimalField(max_digits=14, decimal_places=2, default=Decimal(0))
    run_rate_per_hour = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    computed_at = models.DateTimeField(default=timezone.now)
    notified = models.JSONField(default=list, help_text="Thresholds already announced.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "month"], name="budget_spend_team_month_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team} spent {self.spent} in {core.month_label(self.month)}"
