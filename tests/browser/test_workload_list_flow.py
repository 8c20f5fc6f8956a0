"""The workloads list in a real browser on the whole platform: search and filters, bulk
cancel, and edit-and-resubmit of a finished job."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.accounts.models import User
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.browser.conftest import Platform
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]


def _submit(platform: Platform, user: User, name: str, duration: str, command: str) -> Workload:
    return workload_submit(
        actor=user,
        team=platform.vision,
        gpu_class=platform.classes["h100"],
        image=platform.images["training"],
        request=WorkloadRequest.of(
            kind="training",
            name=name,
            gpu_milli=1000,
            replicas=1,
            command=["python", command],
            max_runtime_seconds=3600,
            params={"pod_annotations": {"kubesim.io/run-duration": duration}},
        ),
    )


def test_search_filter_bulk_cancel_and_resubmit(
    platform: Platform, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    platform.sign_in(page, "alice")
    alice = User.objects.get(username="alice")
    done = _submit(platform, alice, "quick-eval", "1s", "eval.py")
    long_a = _submit(platform, alice, "long-a", "30m", "train.py")
    long_b = _submit(platform, alice, "long-b", "30m", "train.py")
    wait_for(lambda: Workload.objects.get(pk=done.pk).state == "succeeded", timeout=60)
    wait_for(
        lambda: set(
            Workload.objects.filter(pk__in=[long_a.pk, long_b.pk]).values_list("state", flat=True)
        )
        <= {"starting", "running"},
        timeout=60,
    )

    page.get_by_role("link", name="Workloads", exact=True).click()
    expect(page.get_by_role("heading", name="Workloads")).to_be_visible()
    table = page.locator("table.workload-list")
    for name in ("quick-eval", "long-a", "long-b"):
        expect(table.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator("#result-count")).to_have_text("3 workloads")

    # Search reaches the command; the state filter narrows.
    search = page.get_by_role("search")
    search.get_by_label("Search").fill("eval.py")
    search.get_by_role("button", name="Show").click()
    expect(page.locator("#result-count")).to_have_text("1 workload")
    expect(table.get_by_role("link", name="quick-eval", exact=True)).to_be_visible()
    page.get_by_role("link", name="Clear").click()
    search.get_by_label("State").select_option(label="Active")
    search.get_by_label("Sort").select_option(label="Name A–Z")
    search.get_by_role("button", name="Show").click()
    names = table.locator('td[data-label="Name"]').all_inner_texts()
    assert names == ["long-a", "long-b"]
    platform.screenshot(page, "workloads-list")

    # Bulk cancel both running jobs.
    page.get_by_label("Select long-a").check()
    page.get_by_label("Select long-b").check()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel ticked").click()
    expect(page.get_by_role("status")).to_contain_text("Cancelled 2: long-a, long-b.")
    assert set(
        Workload.objects.filter(pk__in=[long_a.pk, long_b.pk]).values_list("state", flat=True)
    ) == {"cancelled"}

    # Edit and resubmit the finished job: the request form comes back filled in.
    page.get_by_role("link", name="Clear").click()
    page.get_by_role("link", name="Edit and resubmit quick-eval").click()
    expect(page.get_by_text("copied from")).to_be_visible()
    name_field = page.get_by_label(re.compile(r"^Name"))
    expect(name_field).to_have_value(re.compile(r"^quick-eval"))
    name_field.fill("quick-eval-2")
    page.get_by_role("button", name="Submit request").click()
    expect(page.get_by_role("heading", name=re.compile("quick-eval-2"))).to_be_visible()
    again = Workload.objects.get(name="quick-eval-2")
    assert again.command == done.command and again.gpu_class_id == done.gpu_class_id
    assert page.js_errors == []
