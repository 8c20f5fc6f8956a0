"""The platform overview and a team's budget, in a real browser, on the whole platform: the
real OpenID provider, the live server, the scheduler and the simulated Kubernetes cluster."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.accounts.models import User
from apps.audit.models import AuditEvent
from apps.quotas.models import TeamQuota
from apps.telemetry.models import UsageDay, WorkloadUsage
from apps.telemetry.services.spend import budget_spend_refresh
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.browser.conftest import Platform

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]

RUNNING_TIMEOUT = 45.0


def submit(
    platform: Platform, who: str, team: Any, name: str, gpus: int, replicas: int
) -> Workload:
    return workload_submit(
        actor=User.objects.get(username=who),
        team=team,
        gpu_class=platform.classes["h100"],
        image=platform.images["training"],
        request=WorkloadRequest.of(
            kind="training",
            name=name,
            gpu_milli=gpus * 1000,
            replicas=replicas,
            command=["python", "train.py"],
            max_runtime_seconds=3600,
            params={"pod_annotations": {"kubesim.io/run-duration": "30m"}},
        ),
    )


def wait_for(check: Callable[[], bool], what: str, platform: Platform) -> None:
    deadline = timezone.now() + timedelta(seconds=RUNNING_TIMEOUT)
    while timezone.now() < deadline:
        if check():
            return
        platform.loop.stopping.wait(0.5)
    raise AssertionError(f"{what}; platform loop errors: {platform.loop.errors[-3:]}")


def measured(workload: Workload, *, utilisation: float, hours: float, used: float) -> None:
    """What the telemetry ingestion records (its Prometheus part is tested elsewhere)."""
    WorkloadUsage.objects.update_or_create(
        workload=workload,
        defaults={
            "last_utilisation": utilisation,
            "allocated_gpu_seconds": hours * 3600,
            "used_gpu_seconds": used * 3600,
        },
    )
    UsageDay.objects.create(
        day=timezone.now().date(),
        workload=workload,
        team=workload.team,
        owner=workload.owner,
        gpu_class=workload.gpu_class,
        allocated_gpu_seconds=hours * 3600,
        used_gpu_seconds=used * 3600,
        cost=Decimal(str(hours)) * workload.gpu_class.hourly_cost,
    )


def test_admin_overview_in_gpus_then_quota_edit_and_the_budget_page(
    platform: Platform, new_page: Callable[..., Any]
) -> None:
    # Sign-ins make the people (and their teams) from the provider's groups.
    page = new_page(viewport=(1366, 900))
    platform.sign_in(page, "admin")
    for who in ("alice", "carol"):
        other = new_page()
        platform.sign_in(other, who)
    # NLP runs 12 H100 on a guarantee of 8: 4 borrowed from capacity no team is guaranteed.
    nlp_run = submit(platform, "carol", platform.nlp, "nlp-pretrain", 6, 2)
    # Vision fills its 8 and queues one more.
    vision_run = submit(platform, "alice", platform.vision, "vision-finetune", 8, 1)
    wait_for(
        lambda: set(
            Workload.objects.filter(pk__in=[nlp_run.pk, vision_run.pk]).values_list(
                "state", flat=True
            )
        )
        <= {"starting", "running"},
        "both runs admitted",
        platform,
    )
    waiting = submit(platform, "alice", platform.vision, "vision-eval", 1, 1)
    wait_for(lambda: Workload.objects.get(pk=waiting.pk).state == "queued", "eval queued", platform)
    measured(Workload.objects.get(pk=nlp_run.pk), utilisation=0.91, hours=12, used=10)
    measured(Workload.objects.get(pk=vision_run.pk), utilisation=0.02, hours=16, used=1)

    page.get_by_role("link", name="Overview").click()
    expect(page.get_by_role("heading", name="Platform overview")).to_be_visible()
    nlp_row = page.locator('#allocation tr[data-team="nlp"][data-class="H100-80GB"]')
    expect(nlp_row.locator(".used-now")).to_have_text("12")  # GPUs, not milli-GPU
    expect(page.locator("#allocation")).not_to_contain_text("12000")
    borrowing = page.locator("#borrowing")
    expect(borrowing).to_contain_text("NLP")
    expect(borrowing).to_contain_text("unassigned capacity")
    expect(page.locator("#queue")).to_contain_text("vision-eval")
    expect(page.locator("#queue .reason")).to_contain_text(re.compile("quota", re.I))
    # Vision: 16 GPU-hours of 4.5 EUR at 1/16 use: 67.50 EUR idle of 72.00.
    vision_idle = page.locator('#idle-cost tr[data-team="vision"]')
    expect(vision_idle).to_contain_text("72.00 EUR")
    expect(vision_idle.locator(".idle")).to_have_text("67.50 EUR")
    expect(page.locator("#busiest tbody tr").first).to_contain_text("nlp-pretrain")
    expect(page.locator("#idlest tbody tr").first).to_contain_text("vision-finetune")
    platform.screenshot(page, "admin-overview")

    # Quota editing in GPUs, with the warning when guarantees exceed the capacity (32 H100).
    form = page.locator("#quota-edit")
    form.get_by_label("Team").select_option(label="NLP")
    form.get_by_label("GPU class").select_option(label="H100-80GB")
    form.get_by_label("Guaranteed (GPUs)").fill("28")
    form.get_by_label("Limit (GPUs)").fill("32")
    form.get_by_role("button", name="Save quota").click()
    expect(page.locator(".messages")).to_contain_text("NLP on H100-80GB: 28 GPU guaranteed")
    expect(page.locator(".messages .warning")).to_contain_text(
        "Guarantees for H100-80GB add up to 36 GPU, more than the 32 GPU"
    )
    quota = TeamQuota.objects.get(team=platform.nlp, gpu_class=platform.classes["h100"])
    assert (quota.guaranteed_milli, quota.limit_milli) == (28000, 32000)
    assert AuditEvent.objects.filter(action="quota.update", object_id=str(quota.pk)).exists()
    expect(page.locator("#capacity")).to_contain_text("36")
    platform.screenshot(page, "admin-overview-quota-warning")

    # The budget page: the admin sets NLP's budget; the spend pass prices what ran.
    page.goto(f"{platform.url}/teams/nlp/budget/")
    edit = page.locator("#budget-edit")
    edit.get_by_label("Amount").fill("50")
    edit.get_by_label("Thresholds").fill("50, 80, 100")
    edit.get_by_label("Hard stop").check()
    edit.get_by_role("button", name="Save budget").click()
    expect(page.locator(".messages")).to_contain_text("Budget of NLP saved.")
    budget_spend_refresh()
    page.reload()
    expect(page.locator("#budget-spent")).to_contain_text("54.00 EUR")  # 12 GPU-h × 4.5
    expect(page.locator("#budget-rate")).to_contain_text("54.00 EUR an hour")  # 12 GPUs now
    expect(page.locator("#budget-forecast")).to_contain_text("over budget at this rate")
    expect(page.locator("#budget-stop")).to_contain_text("the budget is spent")
    platform.screenshot(page, "budget-page")
    page.goto(f"{platform.url}/usage/chargeback/?team=nlp")
    expect(page.locator("#budgets")).to_contain_text("50.00 EUR")
    expect(page.locator("#budgets")).to_contain_text("stopping new work")
    assert page.js_errors == []

    # A member of a team is told the overview is for leads and admins.
    member = new_page()
    platform.sign_in(member, "bob")
    expect(member.get_by_role("link", name="Overview")).to_have_count(0)
    response = member.goto(f"{platform.url}/overview/")
    assert response is not None and response.status == 403
