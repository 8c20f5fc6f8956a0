"""A quota request from ask to expiry and a booking on the reservations calendar, in Chromium
against the live server. The browser covers asking, approving and booking; the grant's effect
and its expiry are checked on the same data with the clock set (the scheduler's snapshot and
its pure cycle take the time as an argument)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from apps.quotas.models import QuotaGrant, QuotaRequest
from apps.reservations.models import Reservation
from apps.reservations.selectors import effective_quota
from apps.scheduling.core import schedule
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads import core
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser


DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def shoot(page: Any, artifacts_dir: Path, name: str, *, docs: bool = False) -> None:
    """A full-page screenshot in test-artifacts/browser/ (and docs/images/ when
    GPUPAAS_UPDATE_DOCS_SCREENSHOTS=1)."""
    path = artifacts_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs and os.environ.get("GPUPAAS_UPDATE_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS_IMAGES / path.name)


def local(delta: timedelta) -> str:
    return (timezone.localtime() + delta).strftime("%Y-%m-%dT%H:%M")


def test_quota_request_from_ask_to_expiry(
    portal: Portal, signed_in: Callable[..., Any], artifacts_dir: Path
) -> None:
    cast = portal.cast
    # Ask, as a member of Vision.
    page = signed_in(cast.owner)
    page.goto(page.base_url + "/quota-requests/")
    page.locator("#id_team").select_option(label=cast.team.name)
    page.locator("#id_gpu_class").select_option(label=cast.gpu_class.name)
    page.get_by_label(re.compile("^More GPUs")).fill("30")
    page.get_by_label(re.compile("^From")).fill(local(timedelta(minutes=-1)))
    page.get_by_label(re.compile("^Until")).fill(local(timedelta(days=14)))
    page.get_by_label(re.compile("^Justification")).fill("Paper deadline: two weeks of sweeps.")
    page.get_by_role("button", name="Send request").click()
    expect(
        page.get_by_role("heading", name=re.compile(r"Quota request #\d+ pending"))
    ).to_be_visible()
    request = QuotaRequest.objects.get()
    assert (request.amount_milli, request.requested_by) == (30000, cast.owner)
    shoot(page, artifacts_dir, "quota-request-asked")

    # A lead cannot decide a team quota: no decision form for them.
    lead = signed_in(cast.lead)
    lead.goto(lead.base_url + f"/quota-requests/{request.pk}/")
    expect(lead.get_by_role("button", name="Record decision")).to_have_count(0)

    # The admin sees it waiting, with the capacity warning, and approves it with a comment.
    admin = signed_in(cast.admin)
    admin.goto(admin.base_url + "/quota-requests/")
    waiting = admin.get_by_role("region", name="Waiting for your decision")
    expect(waiting).to_contain_text("+30 GPU H100-80GB")
    waiting.get_by_role("link", name="decide").click()
    expect(admin.locator("#capacity-note")).to_contain_text(
        "Above available capacity: only 24 GPU of H100-80GB"
    )
    admin.locator("#id_decision").select_option("approve")
    admin.get_by_label(re.compile("^Comment")).fill("More arrives next week; go ahead.")
    shoot(admin, artifacts_dir, "quota-request-deciding")
    admin.get_by_role("button", name="Record decision").click()
    expect(admin.get_by_role("heading", name=re.compile("approved"))).to_be_visible()
    expect(admin.locator("#grant-status")).to_contain_text("in effect until")
    shoot(admin, artifacts_dir, "quota-request-approved", docs=True)

    # The asker sees the decision and its comment.
    page.reload()
    expect(page.get_by_text("“More arrives next week; go ahead.”")).to_be_visible()

    # In effect: the rule set's quota and the scheduler's snapshot carry the grant…
    grant = QuotaGrant.objects.get()
    during = grant.starts_at + timedelta(hours=1)
    quota = effective_quota(cast.team, cast.gpu_class, user=cast.owner, now=during)
    assert quota is not None and (quota.guaranteed_milli, quota.limit_milli) == (34000, 38000)
    big = portal.workload(
        state=core.RUNNING, gpu_milli=8000, replicas=3, admitted_at=grant.starts_at
    )
    assert schedule(scheduling_snapshot(now=during, half_life_seconds=3600)).borrowed_changes == ()
    # … and at its end it expires by itself: the 24 GPUs above the 4 guaranteed keep running,
    # now on borrowed capacity (preemptible with notice), never stopped.
    after = scheduling_snapshot(now=grant.ends_at, half_life_seconds=3600)
    assert after.grants == ()
    result = schedule(after)
    assert result.preemptions == () and (big.pk, True) in result.borrowed_changes
    ended = effective_quota(cast.team, cast.gpu_class, user=cast.owner, now=grant.ends_at)
    assert ended is not None and (ended.guaranteed_milli, ended.limit_milli) == (4000, 8000)


def test_book_on_the_calendar(
    portal: Portal, signed_in: Callable[..., Any], artifacts_dir: Path
) -> None:
    cast = portal.cast
    page = signed_in(cast.lead, viewport=(1400, 900))
    page.goto(page.base_url + f"/reservations/?gpu_class={cast.gpu_class.pk}")
    expect(page.get_by_role("heading", name="Free H100-80GB GPUs per hour")).to_be_visible()
    form = page.get_by_role("region", name="Book")
    start = timezone.localtime().replace(minute=0, second=0, microsecond=0) + timedelta(hours=3)
    form.locator("#id_team").select_option(label=cast.team.name)
    form.locator("#id_gpu_class").select_option(label=cast.gpu_class.name)
    form.get_by_label(re.compile("^Count")).fill("8")
    form.get_by_label(re.compile("^From")).fill(start.strftime("%Y-%m-%dT%H:%M"))
    form.get_by_label(re.compile("^Until")).fill(
        (start + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M")
    )
    form.get_by_label(re.compile("^Note")).fill("Thursday workshop")
    form.get_by_role("button", name="Book").click()
    expect(page.get_by_text(re.compile(r"Reservation #\d+ booked"))).to_be_visible()
    assert Reservation.objects.get().state == Reservation.State.APPROVED
    # The hours of the window now show 16 free instead of 24.
    first = page.locator(f'td.cal[title^="{start.strftime("%a %H:%M")}"]').first
    expect(first).to_have_text("16")
    # Too much for what is left: refused with the figures, on the form.
    form = page.get_by_role("region", name="Book")
    form.get_by_label(re.compile("^Count")).fill("17")
    form.get_by_label(re.compile("^From")).fill(start.strftime("%Y-%m-%dT%H:%M"))
    form.get_by_label(re.compile("^Until")).fill(
        (start + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    )
    form.get_by_role("button", name="Book").click()
    expect(page.get_by_text(re.compile("Only 16 GPU of H100-80GB is free"))).to_be_visible()
    page.goto(page.base_url + f"/reservations/?gpu_class={cast.gpu_class.pk}")
    shoot(page, artifacts_dir, "reservations-calendar", docs=True)
