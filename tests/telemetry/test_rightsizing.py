"""Right-sizing advice from recorded workloads and measured days, applied through the quotas
service in one click (audited with its evidence)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from apps.audit.models import AuditEvent
from apps.quotas.models import TeamQuota
from apps.telemetry.models import UsageDay
from apps.telemetry.selectors.rightsizing import rightsizing
from apps.telemetry.services.rightsizing import advice_apply
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # midnight: the window is exactly 14 days
START = NOW - timedelta(days=14)


def held(cast: Cast, start: datetime, hours: float, gpus: int, share: float | None) -> Workload:
    w = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        gpu_milli=1000,
        replicas=gpus,
        state=Workload.State.SUCCEEDED,
        started_at=start,
        finished_at=start + timedelta(hours=hours),
    )
    if share is not None:
        day = start.date()
        while day <= (start + timedelta(hours=hours)).date():
            UsageDay.objects.create(
                day=day,
                workload=w,
                team=cast.team,
                owner=cast.owner,
                gpu_class=cast.gpu_class,
                allocated_gpu_seconds=3600.0,
                used_gpu_seconds=3600.0 * share,
            )
            day += timedelta(days=1)
    return w


def history(cast: Cast) -> None:
    """4 GPUs held for the whole 14 days at half use; one hour a day 8 more, fully used."""
    held(cast, START - timedelta(days=3), 17 * 24, 4, 0.5)
    for day in range(14):
        held(cast, START + timedelta(days=day, hours=9), 1, 8, 1.0)
    # Another team's work and a workload that never started are not evidence for Vision.
    WorkloadFactory(
        team=cast.other_team,
        owner=cast.outsider,
        gpu_class=cast.gpu_class,
        image=cast.image,
        replicas=8,
        state=Workload.State.RUNNING,
        started_at=START,
    )
    WorkloadFactory(team=cast.team, owner=cast.owner, gpu_class=cast.gpu_class, image=cast.image)


def test_advice_from_recorded_usage(cast: Cast) -> None:
    history(cast)
    rows = {r.team.slug: r for r in rightsizing(days=14, now=NOW)}
    vision = rows[cast.team.slug].advice
    e = vision.evidence
    assert (e.hours, e.active_hours) == (336, 336)
    assert e.allocated_gpu_hours == 4 * 336 + 8 * 14
    assert e.used_gpu_hours == 2 * 336 + 8 * 14
    assert (e.p95_used_milli, e.p95_allocated_milli, e.peak_allocated_milli) == (2000, 4000, 12000)
    assert (vision.guaranteed_milli, vision.limit_milli) == (2000, 5000)
    other = rows[cast.other_team.slug].advice
    assert other.evidence.p95_allocated_milli == 8000  # running since the window's start


def test_applying_advice_sets_the_quota_through_the_service_with_evidence(cast: Cast) -> None:
    history(cast)
    quota = TeamQuota.objects.get(team=cast.team, gpu_class=cast.gpu_class)
    quota.per_user_cap_milli = 6000
    quota.save()
    client = Client()
    client.force_login(cast.admin)
    page = client.get("/overview/advice/?days=14")
    assert page.status_code == 200
    result = advice_apply(
        actor=cast.admin, team=cast.team, gpu_class=cast.gpu_class, days=14, now=NOW
    )
    assert result.quota.pk == quota.pk
    quota.refresh_from_db()
    # The advice, computed again by the service; the per-user cap follows the lower limit.
    assert (quota.guaranteed_milli, quota.limit_milli, quota.per_user_cap_milli) == (
        2000,
        5000,
        5000,
    )
    actions = list(
        AuditEvent.objects.filter(object_id=str(quota.pk))
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions[-2:] == ["quota.update", "quota.advice_applied"]
    evidence = AuditEvent.objects.get(action="quota.advice_applied").details
    assert evidence["days"] == 14 and "p95_used_milli" in evidence


def test_advice_is_for_admins_and_bad_windows_are_explained(cast: Cast) -> None:
    lead = Client()
    lead.force_login(cast.lead)
    assert lead.get("/overview/advice/").status_code == 403
    answer = lead.post(
        "/overview/advice/apply/", {"team": cast.team.slug, "gpu_class": cast.gpu_class.name}
    )
    assert answer.status_code == 403
    admin = Client()
    admin.force_login(cast.admin)
    bad = admin.get("/overview/advice/?days=9999")
    assert bad.status_code == 400 and "from 1 to 90" in bad.content.decode()
    unknown = admin.post(
        "/overview/advice/apply/", {"team": "nope", "gpu_class": cast.gpu_class.name}, follow=True
    )
    assert "No such team or GPU class." in unknown.content.decode()
    # Too little history: nothing to apply, and the reason says so.
    thin = admin.post(
        "/overview/advice/apply/",
        {"team": cast.team.slug, "gpu_class": cast.gpu_class.name, "days": "14"},
        follow=True,
    )
    assert "at least 24 h are needed" in thin.content.decode()
    assert not AuditEvent.objects.filter(action="quota.advice_applied").exists()
