"""The request form's live verdict in a real browser, on the whole platform (the real OpenID
provider, the scheduler and the simulated cluster): it says where a request would start now,
and, once the team's quota is taken, that it would wait — with the same words the API's
``?dry_run=true`` answers."""

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

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]


def test_form_verdict_starts_now_then_waits_once_the_quota_is_taken(
    platform: Platform, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    platform.sign_in(page, "alice")
    page.goto(f"{platform.url}/workloads/new/notebook/")
    # Only the classes Vision may use are offered; L40S is named with the reason.
    classes = page.get_by_label("GPU class")
    expect(classes.locator("option")).to_have_count(2)
    expect(page.locator("#gpu-classes-unavailable")).to_contain_text(
        "L40S-48GB: Vision has no quota for it; ask a platform admin for one."
    )
    page.get_by_label(re.compile(r"^Name")).fill("verdict-lab")
    classes.select_option(label="H100-80GB")
    expect(page.locator("#gpu-quota-left")).to_contain_text("8 of 8 GPU left in Vision's limit")
    expect(page.locator("#gpu-cost")).to_contain_text("4.50 EUR per hour per replica")
    page.get_by_label("Image").select_option(label="PyTorch notebook")
    headline = page.locator("#verdict-headline")
    expect(headline).to_have_attribute("data-outcome", "starts", timeout=15_000)
    expect(headline).to_contain_text(re.compile(r"^Starts now on h100-"))
    expect(page.locator("#verdict-cost")).to_contain_text("4.50 EUR per hour while it runs")
    platform.screenshot(page, "request-form-verdict-starts")
    assert not Workload.objects.filter(name="verdict-lab").exists()

    # A teammate's run takes all 8 H100 of Vision's quota, for at most an hour.
    filler = workload_submit(
        actor=User.objects.get(username="alice"),
        team=platform.vision,
        gpu_class=platform.classes["h100"],
        image=platform.images["training"],
        request=WorkloadRequest.of(
            kind="training",
            name="big-run",
            gpu_milli=8000,
            replicas=1,
            command=["python", "train.py"],
            max_runtime_seconds=3600,
            params={"pod_annotations": {"kubesim.io/run-duration": "30m"}},
        ),
    )
    for _ in range(60):
        filler.refresh_from_db()
        if filler.state in ("admitted", "starting", "running"):
            break
        page.wait_for_timeout(500)
    assert filler.state in ("admitted", "starting", "running"), filler.last_reason

    page.get_by_label("Max runtime (hours)").fill("2")  # any change asks again
    expect(headline).to_have_attribute("data-outcome", "waits", timeout=15_000)
    expect(headline).to_contain_text(
        re.compile(r"^Waits: #1, about (59 min|1 h), because team quota reached")
    )
    text = headline.inner_text()
    platform.screenshot(page, "request-form-verdict")

    # The API's dry run answers the same verdict for the same request.
    response = page.request.post(
        f"{platform.url}/api/v1/workloads/?dry_run=true",
        data={
            "kind": "notebook",
            "name": "verdict-lab",
            "team": "vision",
            "gpu_class": "H100-80GB",
            "image": "PyTorch notebook",
            "gpu_milli": 1000,
            "max_runtime_seconds": 7200,
            "idle_timeout_seconds": 3600,
        },
        headers={"X-CSRFToken": _csrf(page)},
    )
    assert response.status == 200, response.text()
    verdict = response.json()["verdict"]
    assert verdict["outcome"] == "waits"
    assert verdict["headline"].split(", about")[0] == text.split(", about")[0]
    assert not Workload.objects.filter(name="verdict-lab").exists()
    assert page.js_errors == []


def _csrf(page: Any) -> str:
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    return cookies.get("csrftoken", "")
