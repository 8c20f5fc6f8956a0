"""axe-core on every page of the portal, in Chromium against the live server: zero serious or
critical violations (WCAG 2.1 A/AA and axe's best practices), on desktop and on a phone. A
new page must be added here: the URL configuration is checked against this list."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from apps.accounts.services import api_token_create
from apps.quotas.models import QuotaRequest
from apps.telemetry.models import WorkloadUsage
from apps.workloads import core
from apps.workloads.models import RequestTemplate
from tests.browser.axe import serious_violations, with_axe
from tests.factories import UserFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser

# Routes of the portal that are not pages: partials, actions (POST), streams, downloads, JSON,
# redirects and the notebook proxy's auth hooks.
NOT_PAGES = {
    "dashboard-workloads",
    "dashboard-capacity",
    "workload-new-start",
    "workload-new-gpu",
    "workload-new-verdict",
    "template-delete",
    "workload-status",
    "workload-events",
    "workload-logs",
    "workload-logs-download",
    "workload-logs-stream",
    "workload-cancel",
    "workload-suspend",
    "workload-resume",
    "workload-clone",
    "workload-open",
    "notebook-auth",
    "notebook-route-auth",
    "notebook-route-auth-forwarded",
    "notebook-signin",
    "team-dataset-remove",
    "team-secret-rotate",
    "team-secret-delete",
    "accounts:dev-login",
    "accounts:logout",
    "accounts:token-revoke",
    "telemetry:workload-series",
    "telemetry:resume",
    "workload-bulk-cancel",
    "notices-read",
    "endpoint-panel",
    "endpoint-auth",
    "endpoint-key-create",
    "endpoint-key-revoke",
    "endpoint-rollout",
    "endpoint-scale",
    "endpoint-wake",
    "governance-quota-edit",
    "governance-advice-apply",
    "quota-request-withdraw",
    "reservation-decide",
    "reservation-withdraw",
    "team-budget-set",
    "team-budget-approve",
    "team-policy-set",
}
# Pages drawn by a third-party bundle, not by the portal's templates: the API reference is
# Swagger UI's own markup (its colours and nested buttons are its own).
THIRD_PARTY = {"api-docs"}


def portal_routes() -> set[str]:
    names: set[str] = set()

    def walk(patterns: list[Any], namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                module = getattr(p.urlconf_module, "__name__", "")
                if module.startswith("apps.web.urls"):
                    walk(p.url_patterns, p.namespace)
            elif isinstance(p, URLPattern) and p.name and namespace != "top":
                names.add(f"{namespace}:{p.name}" if namespace else p.name)

    walk(get_resolver().url_patterns, "top")  # the top level: health, metrics, OIDC, API
    return names | {"api-docs"}


def pages(portal: Portal) -> dict[str, tuple[str, Any]]:
    """Route name → (path, who looks at it) for every page of the portal."""
    cast = portal.cast
    queued = portal.workload(
        name="queued-train",
        state=core.QUEUED,
        queue_position=2,
        last_reason="Team quota reached.",
        scheduling_advice=["1 GPU of A100-80GB-MIG would start now."],
    )
    finished = portal.workload(
        name="done-train",
        state=core.CANCELLED,
        started_at=timezone.now() - timedelta(hours=2),
        finished_at=timezone.now() - timedelta(hours=1),
    )
    WorkloadUsage.objects.create(
        workload=finished, allocated_gpu_seconds=3600, last_utilisation=0.95
    )
    template = RequestTemplate.objects.create(
        owner=cast.owner, name="nb", kind=core.KIND_NOTEBOOK, values={"name": "x"}
    )
    assert template.pk
    endpoint = portal.workload(
        name="chat-endpoint",
        kind=core.KIND_INFERENCE,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        params={"endpoint": {"min_replicas": 1, "max_replicas": 2, "target_replicas": 1}},
    )
    later = timezone.now() + timedelta(days=1)
    asked = QuotaRequest.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.owner,
        kind=QuotaRequest.Kind.TEAM,
        amount_milli=2000,
        starts_at=later,
        ends_at=later + timedelta(days=7),
        justification="deadline",
    )
    team = cast.team.slug
    return {
        "workload-list": ("/workloads/?q=train&sort=name", cast.owner),
        "workload-detail/endpoint": (f"/workloads/{endpoint.pk}/", cast.lead),
        "notices": ("/notifications/", cast.owner),
        "notification-preferences": ("/notifications/preferences/", cast.owner),
        "governance-overview": ("/overview/", cast.admin),
        "governance-advice": ("/overview/advice/", cast.admin),
        "quota-requests": ("/quota-requests/", cast.owner),
        "quota-request-detail": (f"/quota-requests/{asked.pk}/", cast.admin),
        "reservations": (f"/reservations/?gpu_class={cast.gpu_class.pk}", cast.lead),
        "team-budget": (f"/teams/{team}/budget/", cast.lead),
        "team-policy": (f"/teams/{team}/policy/", cast.lead),
        "home": ("/", cast.owner),
        "workload-new": ("/workloads/new/notebook/", cast.owner),
        "workload-new/training": ("/workloads/new/training/", cast.lead),
        "workload-new/sweep": ("/workloads/new/sweep/", cast.owner),
        "sizing": (
            "/workloads/sizing/?params_billions=13&precision=bf16&task=full",
            cast.owner,
        ),
        "template-list": ("/workloads/templates/", cast.owner),
        "workload-detail": (f"/workloads/{queued.pk}/", cast.owner),
        "workload-detail/finished": (f"/workloads/{finished.pk}/", cast.owner),
        "team-detail": (f"/teams/{team}/", cast.lead),
        "team-datasets": (f"/teams/{team}/datasets/", cast.lead),
        "team-secrets": (f"/teams/{team}/secrets/", cast.owner),
        "accounts:login": ("/accounts/login/", None),
        "accounts:no-team": ("/accounts/no-team/", "no-team"),
        "accounts:profile": ("/accounts/profile/", cast.owner),
        "accounts:tokens": ("/accounts/tokens/", cast.owner),
        "telemetry:home": ("/usage/", cast.owner),
        "telemetry:team": (f"/usage/teams/{team}/", cast.lead),
        "telemetry:heatmap": ("/usage/heatmap/", cast.admin),
        "telemetry:idle": ("/usage/idle/", cast.admin),
        "telemetry:chargeback": ("/usage/chargeback/", cast.lead),
        "telemetry:workload": (f"/usage/workloads/{finished.pk}/", cast.owner),
    }


def test_every_portal_page_is_in_the_accessibility_walk(portal: Portal) -> None:
    covered = {name.split("/")[0] for name in pages(portal)}
    missing = portal_routes() - covered - NOT_PAGES - THIRD_PARTY
    assert not missing, f"pages without an axe check: {sorted(missing)}"


@pytest.mark.parametrize("viewport", [(1366, 768), (375, 812)], ids=["desktop", "phone"])
def test_no_page_has_serious_or_critical_axe_violations(
    portal: Portal,
    signed_in: Callable[..., Any],
    browser_context_factory: Callable[..., Any],
    live_server: Any,
    viewport: tuple[int, int],
) -> None:
    no_team = UserFactory(username="loner")
    found: dict[str, list[dict[str, Any]]] = {}
    viewers: dict[Any, Any] = {}
    for name, (path, who) in pages(portal).items():
        if who is None:
            page = with_axe(browser_context_factory(viewport=viewport).new_page())
            page.base_url = live_server.url
        else:
            user = no_team if who == "no-team" else who
            if user not in viewers:
                viewers[user] = with_axe(signed_in(user, viewport=viewport))
            page = viewers[user]
        page.goto(page.base_url + path)
        violations = serious_violations(page)
        if violations:
            found[name] = violations
    assert not found, "\n".join(
        f"{name}: {v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["nodes"])
        for name, vs in found.items()
        for v in vs
    )


def test_token_page_with_a_new_token_has_no_serious_violations(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    api_token_create(actor=portal.cast.owner, name="ci", scopes=["read"], expires_at=None)
    page = with_axe(signed_in(portal.cast.owner))
    page.goto(page.base_url + "/accounts/tokens/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_selector("#new-token")
    assert serious_violations(page) == []
    # The check can fail: an image without a text alternative is a critical violation.
    page.evaluate("document.querySelector('main').append(document.createElement('img'))")
    assert "image-alt" in {v["id"] for v in serious_violations(page)}
