"""Attacks on what a role may see or change: someone in no team opening the cluster heat map
and the cluster's free capacity, and an admin editing a running workload's GPU amount, team
or owner in the Django admin."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts.roles import Role
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import UserFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

CLUSTER_PAGES = ["/usage/heatmap/", "/partials/dashboard/capacity/"]


def _login(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.mark.parametrize("path", CLUSTER_PAGES)
def test_user_in_no_team_cannot_see_the_cluster_heat_map_or_capacity(cast: Cast, path: str) -> None:
    loner = _login(UserFactory(username="loner"))
    response = loner.get(path)
    assert response.status_code == 302
    assert response["Location"] == "/accounts/no-team/"
    live = loner.get(path, HTTP_HX_REQUEST="true")
    assert live.status_code == 403
    assert b"heat-cell" not in live.content and b"Free" not in live.content


def test_user_in_no_team_is_not_offered_the_heat_map(cast: Cast) -> None:
    page = _login(UserFactory(username="loner")).get("/usage/")
    assert page.status_code == 200
    assert b"/usage/heatmap/" not in page.content
    assert b"/usage/heatmap/" in _login(cast.owner).get("/usage/").content


@pytest.mark.parametrize("path", CLUSTER_PAGES)
def test_team_members_and_admins_see_the_cluster_views(cast: Cast, path: str) -> None:
    for user in (cast.owner, cast.outsider, cast.admin):
        assert _login(user).get(path).status_code == 200, user


@pytest.mark.parametrize("path", CLUSTER_PAGES)
@pytest.mark.parametrize("role", [Role.OPERATOR, Role.AUDITOR])
def test_operators_and_auditors_in_no_team_see_the_cluster_views(
    cast: Cast, path: str, role: Role
) -> None:
    assert _login(UserFactory(username="capacity", roles=[role])).get(path).status_code == 200


@pytest.mark.parametrize("path", CLUSTER_PAGES)
def test_billing_or_a_staff_flag_in_no_team_does_not_see_the_cluster_views(
    cast: Cast, path: str
) -> None:
    billing = UserFactory(username="billing", roles=[Role.BILLING])
    staff = UserFactory(username="staff", is_staff=True, is_superuser=False)
    for user in (billing, staff):
        assert _login(user).get(path, HTTP_HX_REQUEST="true").status_code == 403, user


def test_running_workloads_amount_team_and_owner_are_not_editable_in_the_admin(
    cast: Cast,
) -> None:
    workload = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
        gpu_milli=1000,
    )
    admin = _login(cast.admin)
    url = f"/admin/workloads/workload/{workload.pk}/change/"
    page = admin.get(url)
    assert page.status_code == 200
    for field in ("gpu_milli", "team", "owner", "replicas", "gpu_class"):
        assert f'name="{field}"'.encode() not in page.content, field
    posted = admin.post(
        url,
        {
            "gpu_milli": "8000",
            "team": str(cast.other_team.pk),
            "owner": str(cast.outsider.pk),
            "replicas": "4",
        },
    )
    assert posted.status_code == 403
    workload.refresh_from_db()
    assert (workload.gpu_milli, workload.team_id, workload.owner_id, workload.replicas) == (
        1000,
        cast.team.pk,
        cast.owner.pk,
        1,
    )
    assert admin.get("/admin/workloads/workload/add/").status_code == 403
    assert admin.post(f"/admin/workloads/workload/{workload.pk}/delete/").status_code == 403
    assert Workload.objects.filter(pk=workload.pk).exists()
