from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client

from apps.audit.models import AuditEvent
from apps.quotas.models import TeamQuota
from apps.quotas.services import team_quota_set
from tests.factories import GpuClassFactory, TeamFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_quota_set_creates_then_updates_with_audit(cast: Cast) -> None:
    team = TeamFactory(name="Speech")
    result = team_quota_set(
        actor=cast.admin,
        team=team,
        gpu_class=cast.gpu_class,
        guaranteed_milli=1000,
        limit_milli=2500,
    )
    assert result.warning is None
    team_quota_set(
        actor=cast.admin,
        team=team,
        gpu_class=cast.gpu_class,
        guaranteed_milli=2000,
        limit_milli=4000,
    )
    quota = TeamQuota.objects.get(team=team, gpu_class=cast.gpu_class)
    assert (quota.guaranteed_milli, quota.limit_milli) == (2000, 4000)
    actions = list(
        AuditEvent.objects.filter(object_id=str(quota.pk), object_type="quotas.teamquota")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["quota.create", "quota.update"]


def test_limit_below_guarantee_is_refused(cast: Cast) -> None:
    with pytest.raises(ValidationError) as info:
        team_quota_set(
            actor=cast.admin,
            team=cast.team,
            gpu_class=cast.gpu_class,
            guaranteed_milli=4000,
            limit_milli=1000,
        )
    assert "must be at least the guarantee" in str(info.value.message_dict["limit_milli"])


def test_database_refuses_limit_below_guarantee_even_past_the_service(cast: Cast) -> None:
    quota = TeamQuota.objects.get(team=cast.team)
    with pytest.raises(IntegrityError), transaction.atomic():
        TeamQuota.objects.filter(pk=quota.pk).update(guaranteed_milli=quota.limit_milli + 1)


def test_warning_when_guarantees_exceed_known_capacity(cast: Cast) -> None:
    small = GpuClassFactory(name="L40S", capacity_gpus=2)
    team_quota_set(
        actor=cast.admin, team=cast.team, gpu_class=small, guaranteed_milli=1500, limit_milli=2000
    )
    result = team_quota_set(
        actor=cast.admin,
        team=cast.other_team,
        gpu_class=small,
        guaranteed_milli=1000,
        limit_milli=2000,
    )
    assert result.warning is not None
    assert "2.5 GPU" in result.warning


def quota_form(team_id: int, class_id: int, **overrides: str) -> dict[str, str]:
    data = {
        "team": str(team_id),
        "gpu_class": str(class_id),
        "guaranteed_milli": "1000",
        "limit_milli": "2000",
        "per_user_cap_milli": "",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"limit_milli": "500"}, "must be at least the guarantee"),
        ({"guaranteed_milli": "-1000"}, "greater than or equal to 0"),
        ({"guaranteed_milli": "0.5"}, "Enter a whole number"),
        ({"limit_milli": "lots"}, "Enter a whole number"),
        ({"per_user_cap_milli": "5000"}, "cannot exceed"),
    ],
)
def test_admin_quota_form_shows_readable_errors(
    admin_client: Client, cast: Cast, overrides: dict[str, str], message: str
) -> None:
    team = TeamFactory(name="Speech")
    response = admin_client.post(
        "/admin/quotas/teamquota/add/", quota_form(team.pk, cast.gpu_class.pk, **overrides)
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not TeamQuota.objects.filter(team=team).exists()


def test_admin_duplicate_quota_is_refused(admin_client: Client, cast: Cast) -> None:
    response = admin_client.post(
        "/admin/quotas/teamquota/add/", quota_form(cast.team.pk, cast.gpu_class.pk)
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()


def test_admin_quota_save_warns_about_capacity(admin_client: Client, cast: Cast) -> None:
    tiny = GpuClassFactory(name="T4", capacity_gpus=1)
    response = admin_client.post(
        "/admin/quotas/teamquota/add/",
        quota_form(cast.team.pk, tiny.pk, guaranteed_milli="3000", limit_milli="3000"),
        follow=True,
    )
    assert response.status_code == 200
    assert "more than the 1 GPU known to exist" in response.content.decode()
    assert TeamQuota.objects.filter(team=cast.team, gpu_class=tiny).exists()
    assert AuditEvent.objects.filter(action="quota.create").exists()


def test_quota_usage_shows_on_dashboard(cast: Cast, settings: Any) -> None:
    client = Client()
    client.force_login(cast.owner)
    page = client.get("/").content.decode()
    assert cast.gpu_class.name in page
    assert "used within the guarantee of 4, 0 borrowed, limit 8" in page
