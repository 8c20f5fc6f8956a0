"""Budgets per team and month: forecast, thresholds and the hard stop. Pure, on plain data.

The request rule set (``apps.workloads.rules``) asks :func:`stop_problem` at every door; spend
is computed by telemetry and kept on a record that the rules read (``BudgetSpend``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

DEFAULT_THRESHOLDS = (50, 80, 100)  # percent of the budget
MAX_THRESHOLDS = 10
BATCH = "batch"  # the priority class admitted under a hard stop
CENT = Decimal("0.01")


def month_start(day: date) -> date:
    return day.replace(day=1)


def next_month(first: date) -> date:
    return (first.replace(day=1) + timedelta(days=32)).replace(day=1)


def month_label(first: date) -> str:
    return f"{first.year:04d}-{first.month:02d}"


def money(amount: Decimal, currency: str) -> str:
    """12345.5 → '12,345.50 EUR'."""
    return f"{amount.quantize(CENT):,} {currency}"


def forecast(
    *, spent: Decimal, run_rate_per_hour: Decimal, now: datetime, end: datetime
) -> Decimal:
    """Spend at the end of the month if the current run rate holds until then."""
    hours_left = max(0.0, (end - now).total_seconds() / 3600)
    return (spent + run_rate_per_hour * Decimal(str(hours_left))).quantize(CENT)


def percent_of(amount: Decimal, spent: Decimal) -> int | None:
    if amount <= 0:
        return None
    return int((spent * 100 / amount).to_integral_value(rounding="ROUND_FLOOR"))


def crossed(
    *, amount: Decimal, spent: Decimal, thresholds: Iterable[int], already: Iterable[int]
) -> list[int]:
    """Thresholds (percent) that ``spent`` has reached and that were not yet announced."""
    done = set(already)
    if amount <= 0:
        return []
    return sorted(t for t in set(thresholds) if t not in done and spent * 100 >= amount * t)


def forecast_warning(
    *, amount: Decimal, spent: Decimal, forecast: Decimal, thresholds: Iterable[int]
) -> int | None:
    """The highest threshold (percent) the month's forecast reaches that the spend has not yet:
    what the team will cross at the current run rate (a 5,000 EUR budget forecast at 78,626 EUR
    reaches 100%). None when the forecast reaches none beyond what is already spent."""
    if amount <= 0:
        return None
    ahead = [t for t in set(thresholds) if forecast * 100 >= amount * t > spent * 100]
    return max(ahead) if ahead else None


def threshold_errors(thresholds: Sequence[object]) -> str | None:
    if len(thresholds) > MAX_THRESHOLDS:
        return f"At most {MAX_THRESHOLDS} thresholds."
    for t in thresholds:
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= 1000:
            return "Thresholds are whole percentages from 1 to 1000, e.g. 50, 80, 100."
    if len(set(thresholds)) != len(thresholds):
        return "Each threshold once."
    return None


@dataclass(frozen=True)
class BudgetState:
    """A team's budget for a month and what is spent of it, as the rules and pages read it."""

    team: str
    month: str  # YYYY-MM
    amount: Decimal
    spent: Decimal
    run_rate_per_hour: Decimal
    hard_stop: bool
    stop_lifted: bool  # a lead approved more work for this month
    currency: str
    thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS

    @property
    def exhausted(self) -> bool:
        return self.amount >= 0 and self.spent >= self.amount

    @property
    def stopping(self) -> bool:
        return self.hard_stop and self.exhausted and not self.stop_lifted

    @property
    def percent(self) -> int | None:
        return percent_of(self.amount, self.spent)


def stop_problem(state: BudgetState | None, *, priority_class: str, leads: bool) -> str | None:
    """Why a new request is refused under the team's hard stop, if it is: the month's budget is
    spent and the stop is on; batch work passes, and so does a lead's (their request is the
    approval), as does everyone's once a lead lifted the stop for the month."""
    if state is None or not state.stopping or priority_class == BATCH or leads:
        return None
    return (
        f"{state.team}'s budget for {state.month} is spent "
        f"({money(state.spent, state.currency)} of {money(state.amount, state.currency)}) and "
        "its hard stop is on: new work is admitted only in the batch class, or once a lead of "
        "the team approves more for this month."
    )
