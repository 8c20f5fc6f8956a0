"""Budgets against recorded usage: spend and run rate from what was accrued and what runs now,
thresholds told once to the lead and the admins, the forecast, and the pages that show it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.budgets import core
from apps.budgets.models import Budget, BudgetSpend
from apps.budgets.selectors import budget_report, budget_state
from apps.budgets.services import budget_set
from apps.notifications.models import Notice
from apps.telemetry.models import UsageDay
from apps.telemetry.services.spend import budget_spend_refresh
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


# --- pure ---------------------------------------------------------------------------------------


def test_forecast_adds_the_run_rate_until_the_end_of_the_month() -> None:
    end = datetime(2026, 12, 1, tzinfo=UTC)
    # 10.5 days × 24 h × 10/h = 2,520 on top of 1,000.
    assert core.forecast(
        spent=Decimal(1000), run_rate_per_hour=Decimal(10), now=NOW, end=end
    ) == Decimal("3520.00")
    assert core.forecast(spent=Decimal(5), run_rate_per_hour=Decimal(10), now=end, end=end) == 5


def test_thresholds_are_crossed_once_each() -> None:
    args = {"amount": Decimal(1000), "thresholds": [50, 80, 100]}
    assert core.crossed(spent=Decimal(499), already=[], **args) == []
    assert core.crossed(spent=Decimal(800), already=[], **args) == [50, 80]
    assert core.crossed(spent=Decimal(1200), already=[50, 80], **args) == [100]
    assert core.crossed(spent=Decimal(1200), already=[50, 80, 100], **args) == []
    assert core.crossed(spent=Decimal(1), amount=Decimal(0), thresholds=[50], already=[]) == []


def test_threshold_lists_people_cannot_mean() -> None:
    assert core.threshold_errors([50, 80, 100]) is None
    assert core.threshold_errors([0]) is not None
    assert core.threshold_errors([50, 50]) == "Each threshold once."
    assert core.threshold_errors(list(range(1, 20))) is not None


def state(**kw: object) -> core.BudgetState:
    values: dict[str, object] = {
        "team": "NLP",
        "month": "2026-11",
        "amount": Decimal(40000),
        "spent": Decimal(41200),
        "run_rate_per_hour": Decimal(0),
        "hard_stop": True,
        "stop_lifted": False,
        "currency": "EUR",
    }
    values.update(kw)
    return core.BudgetState(**values)  # type: ignore[arg-type]


def test_the_hard_stop_refuses_only_non_batch_work_of_members() -> None:
    message = core.stop_problem(state(), priority_class="training", leads=False)
    assert message is not None
    assert message.startswith("NLP's budget for 2026-11 is spent (41,200.00 EUR of 40,000.00 EUR)")
    assert core.stop_problem(state(), priority_class="batch", leads=False) is None
    assert core.stop_problem(state(), priority_class="training", leads=True) is None
    assert (
        core.stop_problem(state(stop_lifted=True), priority_class="training", leads=False) is None
    )
    assert core.stop_problem(state(hard_stop=False), priority_class="training", leads=False) is None
    assert core.stop_problem(state(spent=Decimal(100)), priority_class="dev", leads=False) is None
    assert core.stop_problem(None, priority_class="training", leads=False) is None


# --- against recorded usage --------------------------------------------------------------------


def record(cast: Cast, day: date, cost: str, team: object = None) -> None:
    w = WorkloadFactory(
        team=team or cast.team, owner=cast.owner, gpu_class=cast.gpu_class, image=cast.image
    )
    UsageDay.objects.create(
        day=day,
        workload=w,
        team=w.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        allocated_gpu_seconds=3600,
        used_gpu_seconds=1800,
        cost=Decimal(cost),
    )


@pytest.mark.django_db
def test_spend_and_run_rate_come_from_recorded_usage_of_this_month_only(cast: Cast) -> None:
    budget_set(actor=cast.admin, team=cast.team, month=NOW.date(), amount=Decimal(1000))
    record(cast, date(2026, 11, 1), "300.25")
    record(cast, date(2026, 11, 19), "250")
    record(cast, date(2026, 10, 31), "9999")  # last month
    record(cast, date(2026, 11, 5), "7777", team=cast.other_team)  # another team
    # Running now: 2 × 1 GPU of H100 at 4.5 an hour; a finished one costs nothing now.
    WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        replicas=2,
        state=Workload.State.RUNNING,
    )
    WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=Workload.State.SUCCEEDED,
    )
    announced = budget_spend_refresh(now=NOW)
    spend = BudgetSpend.objects.get(team=cast.team)
    assert (spend.spent, spend.run_rate_per_hour) == (Decimal("550.25"), Decimal("9"))
    assert announced == {cast.team.slug: [50]}
    assert not BudgetSpend.objects.filter(team=cast.other_team).exists()  # no budget
    report = budget_report(cast.team, now=NOW)
    assert report is not None
    # 550.25 + 9/h × 252 h left in November.
    assert report.forecast == Decimal("2818.25") and report.over
    assert report.state.percent == 55


@pytest.mark.django_db
def test_thresholds_are_told_to_the_lead_and_admins_once(cast: Cast) -> None:
    budget_set(
        actor=cast.admin,
        team=cast.team,
        month=NOW.date(),
        amount=Decimal(100),
        thresholds=[50, 80, 100],
        hard_stop=True,
    )
    record(cast, date(2026, 11, 2), "85")
    assert budget_spend_refresh(now=NOW) == {cast.team.slug: [50, 80]}
    assert budget_spend_refresh(now=NOW + timedelta(minutes=5)) == {}
    notices = Notice.objects.filter(event="budget_threshold")
    assert sorted(notices.values_list("user__username", "key")) == [
        ("admin", f"budget:{cast.team.pk}:2026-11:50"),
        ("admin", f"budget:{cast.team.pk}:2026-11:80"),
        ("lead", f"budget:{cast.team.pk}:2026-11:50"),
        ("lead", f"budget:{cast.team.pk}:2026-11:80"),
    ]
    body = notices.filter(key__endswith=":80").first()
    assert body is not None and "85.00 EUR of its 100.00 EUR budget" in body.body
    assert "hard stop" in body.body and body.link == f"/teams/{cast.team.slug}/budget/"
    assert AuditEvent.objects.filter(action="budget.threshold").count() == 2
    record(cast, date(2026, 11, 3), "20")
    assert budget_spend_refresh(now=NOW) == {cast.team.slug: [100]}
    stopped = budget_state(cast.team, date(2026, 11, 1))
    assert stopped is not None and stopped.stopping


@pytest.mark.django_db
def test_a_budget_carries_forward_until_a_later_month_has_its_own(cast: Cast) -> None:
    budget_set(actor=cast.admin, team=cast.team, month=date(2026, 9, 14), amount=Decimal(500))
    budget_set(actor=cast.admin, team=cast.team, month=date(2026, 12, 1), amount=Decimal(800))
    november = budget_state(cast.team, date(2026, 11, 1))
    december = budget_state(cast.team, date(2026, 12, 1))
    assert november is not None and november.amount == 500
    assert december is not None and december.amount == 800
    assert budget_state(cast.team, date(2026, 8, 1)) is None
    assert Budget.objects.get(month=date(2026, 9, 1)).updated_by == cast.admin


# --- the pages ---------------------------------------------------------------------------------


def client(user: object) -> Client:
    c = Client()
    c.force_login(user)  # type: ignore[arg-type]
    return c


@pytest.mark.django_db
def test_budget_page_members_see_admins_set_leads_approve_outsiders_404(cast: Cast) -> None:
    url = f"/teams/{cast.team.slug}/budget/"
    month = core.month_label(timezone.now().date())
    assert client(cast.outsider).get(url).status_code == 404
    assert "has no budget" in client(cast.owner).get(url).content.decode()
    bad = client(cast.admin).post(
        url + "set/", {"month": "2026-13", "amount": "-5", "thresholds": "50, lots"}
    )
    assert bad.status_code == 400
    html = bad.content.decode()
    assert "has no month 13" in html and "A budget cannot be negative" in html
    assert "Ensure this value" not in html
    assert "whole percentages" in html and not Budget.objects.exists()
    refused = client(cast.lead).post(
        url + "set/", {"month": month, "amount": "100", "thresholds": "50"}
    )
    assert refused.status_code == 403 and not Budget.objects.exists()
    ok = client(cast.admin).post(
        url + "set/",
        {"month": month, "amount": "1000", "thresholds": "80, 100", "hard_stop": "on"},
    )
    assert ok.status_code == 302
    budget = Budget.objects.get()
    assert (budget.amount, budget.thresholds, budget.hard_stop) == (Decimal(1000), [80, 100], True)
    BudgetSpend.objects.create(
        team=cast.team, month=core.month_start(timezone.now().date()), spent=Decimal(1500)
    )
    page = client(cast.lead).get(url).content.decode()
    assert "new work is admitted only in the batch class" in page
    assert "Approve more work this month" in page
    assert "Approve more work" not in client(cast.owner).get(url).content.decode()
    assert client(cast.owner).post(url + "approve/").status_code == 403
    assert client(cast.lead).post(url + "approve/").status_code == 302
    budget.refresh_from_db()
    assert budget.stop_lifted_by == cast.lead
    assert AuditEvent.objects.filter(action="budget.stop_lift", actor=cast.lead).exists()


@pytest.mark.django_db
def test_chargeback_shows_budget_and_forecast_for_the_month(cast: Cast) -> None:
    today = timezone.now().date()
    budget_set(actor=cast.admin, team=cast.team, month=today, amount=Decimal(2000))
    budget_set(actor=cast.admin, team=cast.other_team, month=today, amount=Decimal(3000))
    BudgetSpend.objects.create(
        team=cast.team, month=core.month_start(today), spent=Decimal("1234.5")
    )
    html = client(cast.owner).get("/usage/chargeback/").content.decode()
    section = html.split('id="budgets"')[1].split("</section>")[0]
    assert "2,000.00 EUR" in section and "1,234.50 EUR" in section
    assert 'class="forecast"' in section
    assert cast.other_team.name not in section  # not the owner's team
