"""Small defects of the portal, each pinned: a finished workload's last utilisation is not
"now", filters offer only kinds a person can request, an admin is not told to ask an admin,
and a user without a team is not offered pages that only redirect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.models import WorkloadUsage
from apps.web.forms.workloads import TeamWorkloadFilterForm
from apps.workloads import core, rules
from tests.factories import TeamFactory, UserFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def test_a_cancelled_workload_shows_its_last_utilisation_not_now(portal: Portal) -> None:
    cancelled = portal.workload(
        state=core.CANCELLED,
        started_at=timezone.now() - timedelta(hours=2),
        finished_at=timezone.now() - timedelta(hours=1),
    )
    WorkloadUsage.objects.create(
        workload=cancelled,
        allocated_gpu_seconds=3600,
        last_utilisation=0.95,
        idle_since=timezone.now() - timedelta(hours=3),
    )
    html = portal.client(portal.cast.owner).get(f"/workloads/{cancelled.pk}/").content.decode()
    assert "now 95%" not in html and "last measured 95%" in html
    assert "idle since" not in html
    running = portal.workload(state=core.RUNNING, started_at=timezone.now())
    WorkloadUsage.objects.create(workload=running, last_utilisation=0.95)
    html = portal.client(portal.cast.owner).get(f"/workloads/{running.pk}/").content.decode()
    assert "now 95%" in html


def test_kind_filters_offer_only_kinds_a_person_can_request(portal: Portal) -> None:
    form = TeamWorkloadFilterForm(team=portal.cast.team)
    offered = [value for value, _ in form.fields["kind"].choices if value]  # type: ignore[attr-defined]
    assert offered == list(rules.SUBMITTABLE_KINDS)
    # Endpoints are requestable (by leads and admins), so the filters offer them too.
    html = portal.client(portal.cast.lead).get(f"/teams/{portal.cast.team.slug}/").content
    assert b"Inference endpoint" in html


def test_an_admin_is_not_told_to_ask_a_platform_admin_for_quota(portal: Portal) -> None:
    bare = TeamFactory(name="Bare")
    html = portal.client(portal.cast.admin).get(f"/teams/{bare.slug}/").content.decode()
    assert "ask a platform admin" not in html
    assert "under Team quotas in the" in html


def test_navigation_of_a_user_without_a_team_leads_only_to_pages_they_can_use(
    portal: Portal,
) -> None:
    html = portal.client(UserFactory(username="loner")).get("/accounts/no-team/").content
    nav = html.decode().split('aria-label="Main"')[1].split("</nav>")[0]
    assert 'href="/accounts/no-team/"' in nav
    for page in ('href="/"', "/workloads/new/", "/workloads/templates/", "/usage/"):
        assert page not in nav
    member_nav = portal.client(portal.cast.owner).get("/").content.decode()
    assert "/workloads/new/" in member_nav.split('aria-label="Main"')[1].split("</nav>")[0]
