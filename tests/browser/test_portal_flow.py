"""What a data scientist does in the portal, in a real browser, on the whole platform: the
real OpenID provider, the live server, the scheduler and the simulated Kubernetes cluster."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.accounts.models import User
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.browser.conftest import NOTEBOOK_HOST, Platform

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]

RUNNING_TIMEOUT = 45_000


def state_badge(page: Any) -> Any:
    return page.locator("#workload-state")


def expect_state(page: Any, platform: Platform, state: str, *, timeout: float) -> None:
    """Wait for the workload page to show ``state`` by itself; on failure say what it shows."""
    try:
        expect(state_badge(page)).to_have_attribute("data-state", state, timeout=timeout)
    except AssertionError as exc:
        reason = page.locator("#workload-reason").inner_text()
        events = page.locator("#cluster-events").inner_text()
        raise AssertionError(
            f"{exc}\nreason shown: {reason}\nevents shown: {events}\n"
            f"platform loop errors: {platform.loop.errors[-3:]}"
        ) from None


def test_notebook_reaches_running_live_then_suspends_resumes_and_cancels(
    platform: Platform, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    platform.sign_in(page, "alice")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    page.get_by_role("link", name="New notebook").click()
    page.get_by_label(re.compile(r"^Name")).fill("alice-lab")
    page.get_by_label("GPU class").select_option(label="A100-80GB-MIG")
    # The amounts follow the class: fractions, each with what it becomes.
    amount = page.get_by_label("GPU amount")
    expect(
        amount.locator("option", has_text="0.25 GPU — 0.25 × A100-80GB-MIG → MIG 2g.20gb")
    ).to_have_count(1)
    # The class change redraws the GPU section (and the live verdict may answer after it): pick
    # the amount again if a late redraw put the default back.
    for attempt in range(3):
        amount.select_option("250")
        try:
            expect(page.locator("#gpu-preview")).to_contain_text("MIG 2g.20gb", timeout=4000)
            break
        except AssertionError:
            if attempt == 2:
                raise
    page.get_by_label("Image").select_option(label="PyTorch notebook")
    platform.screenshot(page, "request-form", docs=True)
    page.get_by_role("button", name="Submit request").click()

    expect(page.get_by_role("heading", name=re.compile("alice-lab"))).to_be_visible()
    url = page.url
    page.evaluate("window.__notReloaded = true")
    # The scheduler admits it, orchestration creates it, the status sync sees it run; the page
    # follows by itself.
    expect_state(page, platform, "running", timeout=RUNNING_TIMEOUT)
    assert page.evaluate("window.__notReloaded") is True and page.url == url
    expect(page.locator("#placement-cluster")).to_have_text("sim")
    expect(page.locator("table.placement")).to_contain_text("a100-mig-")
    expect(page.locator("#timeline")).to_contain_text("running")
    expect(page.get_by_role("link", name="Open notebook")).to_be_visible()
    # Opening sends the owner in with a one-time ticket; the Jupyter token stays in its Secret.
    notebook = Workload.objects.get(name="alice-lab")
    opened = page.request.get(f"{url}open/", max_redirects=0)
    secret = platform.kube.read_namespaced_secret(
        f"wl-{notebook.pk}-token", notebook.team.namespace
    )
    token = base64.b64decode(secret.data["token"]).decode()
    assert opened.status == 302
    assert opened.headers["location"].startswith(
        f"https://{NOTEBOOK_HOST}/notebooks/{notebook.team.namespace}/{notebook.pk}/"
        "?gpupaas-ticket="
    )
    assert token not in opened.headers["location"]
    teammate = new_page()
    platform.sign_in(teammate, "bob")
    assert teammate.request.get(f"{url}open/", max_redirects=0).status == 403
    expect(page.locator("#cluster-events")).to_contain_text("Scheduled", timeout=15_000)
    platform.screenshot(page, "workload-page", docs=True)

    page.get_by_role("link", name="Dashboard").click()
    row = page.locator("tr", has=page.get_by_role("link", name="alice-lab"))
    expect(row.locator(".state")).to_have_text("Running")
    expect(page.locator(".qbar").first).to_be_visible()
    platform.screenshot(page, "dashboard", docs=True)
    phone = new_page(viewport=(375, 812))
    phone.context.add_cookies(page.context.cookies())
    phone.goto(platform.url + "/")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    platform.screenshot(phone, "dashboard-phone")

    row.get_by_role("link", name="alice-lab").click()
    page.get_by_role("button", name="Suspend").click()
    expect(state_badge(page)).to_have_attribute("data-state", "suspended")
    page.get_by_role("button", name="Resume").click()
    expect_state(page, platform, "running", timeout=RUNNING_TIMEOUT)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel").click()
    expect(state_badge(page)).to_have_attribute("data-state", "cancelled")
    expect(page.locator("#timeline")).to_contain_text("Cancelled by alice")
    assert page.js_errors == []


def test_training_job_waits_on_a_full_quota_and_outsiders_get_404(
    platform: Platform, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    platform.sign_in(page, "alice")
    alice = User.objects.get(username="alice")
    # A teammate's run already holds all 8 H100 of Vision's quota.
    filler = workload_submit(
        actor=alice,
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
    page.goto(f"{platform.url}/workloads/{filler.pk}/")
    expect(state_badge(page)).to_have_attribute("data-state", re.compile("starting|running"))

    page.goto(f"{platform.url}/workloads/new/training/")
    page.get_by_label(re.compile(r"^Name")).fill("waits-for-quota")
    page.get_by_label("GPU class").select_option(label="H100-80GB")
    page.get_by_label("GPUs per node").select_option("1000")
    page.get_by_label("Image").select_option(label="PyTorch training")
    page.get_by_label("Command").fill("torchrun train.py")
    page.get_by_label("Arguments").fill("--epochs 3")
    page.get_by_role("button", name="Submit request").click()

    expect(page.get_by_role("heading", name="Waiting for GPUs")).to_be_visible()
    expect(page.locator("#queue-reason")).to_contain_text(re.compile("quota", re.I))
    expect(page.locator("#queue-position")).to_have_text(re.compile(r"#\d+"))
    expect(page.locator("#estimated-start")).to_contain_text("in about")
    expect(state_badge(page)).to_have_attribute("data-state", "queued")
    platform.screenshot(page, "workload-waiting")
    waiting = Workload.objects.get(name="waits-for-quota")
    assert waiting.state == "queued" and waiting.estimated_start_at is not None

    outsider = new_page()
    platform.sign_in(outsider, "carol")
    for path in (
        f"/workloads/{waiting.pk}/",
        f"/workloads/{filler.pk}/",
        f"/teams/{platform.vision.slug}/",
    ):
        response = outsider.goto(platform.url + path)
        assert response is not None and response.status == 404, path
    expect(outsider.locator("body")).not_to_contain_text("waits-for-quota")
    outsider.goto(platform.url + "/")
    expect(outsider.locator("body")).not_to_contain_text("waits-for-quota")
    assert page.js_errors == [] and outsider.js_errors == []
