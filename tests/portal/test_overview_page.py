"""The platform overview in the portal: in GPUs, leads see their teams, admins every team and
edit quotas in GPUs through the audited service."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.quotas.models import TeamQuota
from apps.telemetry.models import UsageDay, WorkloadUsage
from apps.workloads.models import Workload
from tests.factories import GpuClassFactory, TeamQuotaFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def running(portal: Portal, **kw: object) -> Workload:
    return portal.workload(state=Workload.State.RUNNING, started_at=timezone.now(), **kw)


def test_lead_sees_own_team_in_gpus_and_no_other_team(portal: Portal) -> None:
    cast = portal.cast
    w = running(portal, name="big-train", gpu_milli=2000, replicas=3)  # 6 GPUs of 4 guaranteed
    WorkloadUsage.objects.create(workload=w, last_utilisation=0.93)
    running(portal, team=cast.other_team, owner=cast.outsider, name="their-secret-run")
    page = portal.client(cast.lead).get("/overview/")
    assert page.status_code == 200
    html = page.content.decode()
    row = html.split('data-team="' + cast.team.slug + '" data-class="H100-80GB"')[1]
    assert ">6</td>" in row.split("</tr>")[0]  # used now, in GPUs
    assert "6000" not in row.split("</tr>")[0]
    assert "big-train" in html and "93%" in html
    assert "their-secret-run" not in html
    assert f'data-team="{cast.other_team.slug}"' not in html
    assert "Set a team's quota" not in html  # leads do not edit quotas


def test_members_and_outsiders_are_told_the_overview_is_not_for_them(portal: Portal) -> None:
    for user in (portal.cast.owner, portal.cast.outsider):
        page = portal.client(user).get("/overview/")
        assert page.status_code == 403
        assert "team leads and platform admins" in page.content.decode()
    assert portal.client(portal.cast.owner).get("/").content.decode().count("/overview/") == 0
    assert "/overview/" in portal.client(portal.cast.lead).get("/").content.decode()


def test_admin_sees_who_borrows_from_whom_and_idle_cost_in_currency(
    portal: Portal, settings: object
) -> None:
    cast = portal.cast
    settings.PLATFORM_CURRENCY = "CHF"  # type: ignore[attr-defined]
    running(portal, gpu_milli=2000, replicas=3)  # Vision: 6 of 4 guaranteed → borrows 2
    w = running(portal, name="half-idle")
    today = timezone.now().date()
    UsageDay.objects.create(
        day=today,
        workload=w,
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        allocated_gpu_seconds=10 * 3600,
        used_gpu_seconds=4 * 3600,
        cost=Decimal("45"),
    )
    html = portal.client(cast.admin).get("/overview/").content.decode()
    borrowing = html.split('id="borrowing"')[1].split("</section>")[0]
    # 32 GPUs, 8 guaranteed: Vision's 3 borrowed come from unassigned capacity.
    assert "Vision" in borrowing and "unassigned capacity" in borrowing and ">3</td>" in borrowing
    idle = html.split('id="idle-cost"')[1].split("</section>")[0]
    assert "27.00 CHF" in idle  # 45 × 6/10 idle
    assert "45.00 CHF" in idle


def test_admin_sets_quota_in_gpus_audited_and_warned_over_capacity(portal: Portal) -> None:
    cast = portal.cast
    small = GpuClassFactory(name="L40S-48GB", capacity_gpus=2)
    TeamQuotaFactory(team=cast.other_team, gpu_class=small, guaranteed_milli=1500, limit_milli=2000)
    client = portal.client(cast.admin)
    answer = client.post(
        "/overview/quotas/",
        {"team": cast.team.slug, "gpu_class": small.name, "guaranteed": "1.5", "limit": "2"},
        follow=True,
    )
    assert answer.status_code == 200
    quota = TeamQuota.objects.get(team=cast.team, gpu_class=small)
    assert (quota.guaranteed_milli, quota.limit_milli) == (1500, 2000)
    html = answer.content.decode()
    assert "Guarantees for L40S-48GB add up to 3 GPU, more than the 2 GPU" in html
    event = AuditEvent.objects.get(action="quota.create", object_id=str(quota.pk))
    assert event.actor == cast.admin


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"guaranteed": "4", "limit": "2"}, "limit", "must be at least the guarantee"),
        ({"guaranteed": "0.0001", "limit": "2"}, "guaranteed", "decimal places"),
        ({"guaranteed": "-1", "limit": "2"}, "guaranteed", "A number of GPUs cannot be negative."),
        ({"guaranteed": "1e9", "limit": "1e9"}, "guaranteed", "At most 100,000 GPUs"),
        ({"guaranteed": "x", "limit": "2"}, "guaranteed", "Enter a number"),
        ({"guaranteed": "1", "limit": "2", "per_user_cap": "3"}, "per_user_cap", "cannot exceed"),
    ],
)
def test_bad_quota_input_is_a_form_error(
    portal: Portal, form: dict[str, str], field: str, message: str
) -> None:
    cast = portal.cast
    before = list(TeamQuota.objects.values_list("guaranteed_milli", "limit_milli"))
    answer = portal.client(cast.admin).post(
        "/overview/quotas/",
        {"team": cast.team.slug, "gpu_class": cast.gpu_class.name, **form},
    )
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert "Ensure this value" not in answer.content.decode()
    assert f'id="id_{field}_error"' in answer.content.decode()
    assert list(TeamQuota.objects.values_list("guaranteed_milli", "limit_milli")) == before


def test_only_admins_change_quotas(portal: Portal) -> None:
    cast = portal.cast
    answer = portal.client(cast.lead).post(
        "/overview/quotas/",
        {"team": cast.team.slug, "gpu_class": cast.gpu_class.name, "guaranteed": "9", "limit": "9"},
    )
    assert answer.status_code == 403
    assert TeamQuota.objects.get(team=cast.team, gpu_class=cast.gpu_class).limit_milli == 8000


def test_queue_across_teams_shows_reasons(portal: Portal) -> None:
    cast = portal.cast
    portal.workload(
        name="waits-here",
        state=Workload.State.QUEUED,
        queue_position=2,
        last_reason="Team quota reached: 8 of 8 GPU in use.",
        estimated_start_at=timezone.now() + timedelta(minutes=40),
    )
    portal.workload(
        name="theirs",
        team=cast.other_team,
        owner=cast.outsider,
        state=Workload.State.QUEUED,
        queue_position=1,
        last_reason="No H100-80GB free.",
    )
    html = portal.client(cast.admin).get("/overview/").content.decode()
    queue = html.split('id="queue"')[1].split("</section>")[0]
    assert queue.index("theirs") < queue.index("waits-here")
    assert "Team quota reached: 8 of 8 GPU in use." in queue
    lead_queue = portal.client(cast.lead).get("/overview/").content.decode()
    assert "waits-here" in lead_queue and "theirs" not in lead_queue
