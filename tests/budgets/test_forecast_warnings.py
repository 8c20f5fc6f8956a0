"""Budget thresholds warn on the month's forecast too: a team on course to overspend is told
before the money is gone, once per threshold, and not at all when the setting is off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import override_settings

from apps.budgets import core
from apps.budgets.services import budget_set, budget_spend_record
from apps.notifications.models import Notice
from tests.plugins.cast import Cast

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# 310 EUR an hour for the 252 hours left of November, on top of 506 EUR spent: 78,626 EUR.
RATE = Decimal("310")
SPENT = Decimal("506")


def test_the_forecast_warns_at_the_highest_threshold_it_reaches_beyond_the_spend() -> None:
    warn = core.forecast_warning
    assert (
        warn(amount=Decimal(5000), spent=SPENT, forecast=Decimal(78626), thresholds=[50, 80, 100])
        == 100
    )
    assert (
        warn(amount=Decimal(5000), spent=SPENT, forecast=Decimal(4100), thresholds=[50, 80, 100])
        == 80
    )
    # Already spent past 50%: the spend's own warning says so, the forecast adds nothing.
    assert (
        warn(amount=Decimal(5000), spent=Decimal(2600), forecast=Decimal(3900), thresholds=[50, 80])
        is None
    )
    assert warn(amount=Decimal(0), spent=SPENT, forecast=Decimal(78626), thresholds=[50]) is None


@pytest.mark.django_db
def test_a_5000_eur_budget_with_a_78626_eur_forecast_warns_the_lead_and_admins_once(
    cast: Cast,
) -> None:
    budget_set(
        actor=cast.admin,
        team=cast.team,
        month=NOW.date(),
        amount=Decimal(5000),
        thresholds=[50, 80, 100],
    )
    assert (
        budget_spend_record(
            team=cast.team, month=NOW.date(), spent=SPENT, run_rate_per_hour=RATE, now=NOW
        )
        == []
    )  # 506 of 5,000 spent: no threshold reached yet
    warned = Notice.objects.filter(key=f"budget-forecast:{cast.team.pk}:2026-11:100")
    assert sorted(warned.values_list("user__username", flat=True)) == ["admin", "lead"]
    notice = warned.first()
    assert notice is not None
    assert "on course to spend 100% of its budget for 2026-11" in notice.title
    assert "78,626.00 EUR" in notice.body and "5,000.00 EUR" in notice.body
    assert "310.00 EUR an hour" in notice.body
    budget_spend_record(
        team=cast.team,
        month=NOW.date(),
        spent=SPENT,
        run_rate_per_hour=RATE,
        now=NOW + timedelta(minutes=5),
    )
    assert Notice.objects.filter(key__startswith="budget-forecast:").count() == 2


@pytest.mark.django_db
@override_settings(BUDGET_FORECAST_WARNINGS=False)
def test_forecast_warnings_can_be_switched_off(cast: Cast) -> None:
    budget_set(actor=cast.admin, team=cast.team, month=NOW.date(), amount=Decimal(5000))
    budget_spend_record(
        team=cast.team, month=NOW.date(), spent=SPENT, run_rate_per_hour=RATE, now=NOW
    )
    assert not Notice.objects.filter(key__startswith="budget-forecast:").exists()
