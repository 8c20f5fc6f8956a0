"""Grants and reservations reach the team's ResourceQuota on the real control plane, and leave
it again when they end (the cluster enforces the quota in effect a second time)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.quotas.models import QuotaGrant, QuotaRequest
from apps.reservations.models import Reservation
from tests.factories import UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, gpu_limits, team

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
__all__ = ["cluster", "core_api", "team"]  # fixtures


def hard(core: k8s.CoreV1Api, team: Team) -> dict[str, str]:
    quota = core.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace)
    return gpu_limits(quota.spec.hard)


def test_a_grant_and_a_reservation_raise_the_resource_quota_while_in_effect(
    team: Team, core_api: Any
) -> None:
    quota = team.quotas.select_related("gpu_class").get()
    asker = UserFactory()
    now = timezone.now()
    request = QuotaRequest.objects.create(
        team=team,
        gpu_class=quota.gpu_class,
        requested_by=asker,
        amount_milli=4000,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(hours=1),
        justification="deadline",
        state=QuotaRequest.State.APPROVED,
    )
    grant = QuotaGrant.objects.create(
        request=request,
        team=team,
        gpu_class=quota.gpu_class,
        amount_milli=4000,
        starts_at=request.starts_at,
        ends_at=request.ends_at,
    )
    booking = Reservation.objects.create(
        team=team,
        gpu_class=quota.gpu_class,
        requested_by=asker,
        count=2,
        total_milli=2000,
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=1),
        state=Reservation.State.APPROVED,
    )
    services.team_namespace_ensure(team=team)
    assert hard(core_api, team) == {"requests.nvidia.com/gpu": "14"}  # 8 + 4 granted + 2 booked
    # Both end: back to the base limit.
    QuotaGrant.objects.filter(pk=grant.pk).update(ends_at=now - timedelta(minutes=1))
    Reservation.objects.filter(pk=booking.pk).update(ends_at=now - timedelta(minutes=1))
    services.team_namespace_ensure(team=team)
    assert hard(core_api, team) == {"requests.nvidia.com/gpu": "8"}
