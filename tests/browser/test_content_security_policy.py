"""The Content-Security-Policy in Chromium: every portal page, the usage pages with their
charts, the admin and the API docs load and work under it with no violation (the browser
plugin fails any test whose pages report one), and a violation is indeed seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.workloads import core
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser


def test_portal_pages_run_under_the_policy_without_violations(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    workload = portal.workload(name="csp-train", state=core.RUNNING)
    team = portal.cast.team.slug
    page = signed_in(portal.cast.lead)
    response = page.goto(page.base_url + "/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    # The dashboard's live parts poll with htmx and swap their fragments in.
    with page.expect_response(lambda r: "/partials/dashboard/workloads/" in r.url):
        pass
    expect(page.locator("svg.qbar").first).to_be_visible()
    for path in (
        "/workloads/new/notebook/",
        "/workloads/new/training/",
        "/workloads/new/sweep/",
        "/workloads/sizing/?params_billions=7&precision=bf16&task=lora",
        "/workloads/templates/",
        f"/workloads/{workload.pk}/",
        f"/teams/{team}/",
        "/accounts/profile/",
        "/accounts/tokens/",
        "/usage/heatmap/",
        "/usage/idle/",
        "/usage/chargeback/",
        "/usage/chargeback/?month=9999-12",
        f"/usage/workloads/{workload.pk}/",
    ):
        page.goto(page.base_url + path)
        page.wait_for_load_state("networkidle")
    # The usage charts are drawn by a script file from data attributes.
    for path in ("/usage/", f"/usage/teams/{team}/"):
        page.goto(page.base_url + path)
        expect(page.locator(".uplot").first).to_be_visible()
    assert page.context.csp_violations == []


def test_admin_and_api_docs_run_under_the_policy_without_violations(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    workload = portal.workload(name="csp-admin", state=core.RUNNING)
    page = signed_in(portal.cast.admin)
    for path in (
        "/admin/",
        "/admin/workloads/workload/",
        f"/admin/workloads/workload/{workload.pk}/change/",
        "/admin/accounts/team/",
    ):
        page.goto(page.base_url + path)
        page.wait_for_load_state("networkidle")
    page.goto(page.base_url + "/api/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert page.context.csp_violations == []


def test_an_inline_script_is_refused_and_reported(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    """The watch itself: an injected inline script does not run, and the violation is seen."""
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/accounts/profile/")
    page.evaluate(
        """() => { const s = document.createElement("script");
                   s.textContent = "document.body.dataset.injected = 'ran'";
                   document.body.appendChild(s); }"""
    )
    page.wait_for_timeout(200)
    assert page.evaluate("document.body.dataset.injected") is None
    assert any("Content Security Policy" in v for v in page.context.csp_violations)
    page.context.csp_violations.clear()  # expected here; any other test would fail on it
