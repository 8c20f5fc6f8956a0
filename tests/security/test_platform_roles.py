"""Platform roles through the portal and the Django admin (the API's side is
tests/api/test_platform_roles_matrix.py). Found from outside: a staff user with no model
permissions listed every workload, cancelled another team's notebook, changed a team's policy
and made someone a lead. The staff flag alone now grants nothing beyond the admin's own model
permissions; each role may do what apps/accounts/roles.py says, at every door."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import Membership, User
from apps.accounts.roles import Role
from apps.accounts.services import api_token_create
from apps.budgets.core import month_label
from apps.budgets.models import Budget
from apps.budgets.selectors import this_month
from apps.catalog.models import Cluster, ClusterNode, GpuClass, NodeMaintenance
from apps.catalog.services import cluster_save, gpu_class_save
from apps.policies.models import TeamPolicy
from apps.quotas.models import TeamQuota
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import UserFactory, WorkloadFactory
from tests.platform.test_admin_writes import AdminForm, url
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def _portal(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user: User) -> APIClient:
    _, token = api_token_create(actor=user, name="t", scopes=["write"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _staff_only() -> User:
    return UserFactory(username="staff-only", is_staff=True, is_superuser=False)


def _holder(role: Role) -> User:
    return UserFactory(username=f"{role.value}-person", roles=[role])


def _notebook(cast: Cast) -> Workload:
    return WorkloadFactory(
        name="their-notebook",
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        kind=core.KIND_NOTEBOOK,
        state=core.RUNNING,
    )


# --- the finding: a staff flag alone ---------------------------------------------------------


def test_staff_without_a_platform_role_cannot_cancel_another_teams_notebook(cast: Cast) -> None:
    notebook = _notebook(cast)
    staff = _staff_only()
    portal = _portal(staff).post(f"/workloads/{notebook.pk}/cancel/")
    api = _api(staff).post(f"/api/v1/workloads/{notebook.pk}/cancel/", {}, format="json")
    assert (portal.status_code, api.status_code) == (404, 404)
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING


def test_staff_without_a_platform_role_lists_no_other_teams_workloads(cast: Cast) -> None:
    _notebook(cast)
    staff = _staff_only()
    assert "their-notebook" not in _portal(staff).get("/workloads/").content.decode()
    assert _api(staff).get("/api/v1/workloads/").json()["results"] == []


def test_staff_without_a_platform_role_cannot_change_a_teams_policy(cast: Cast) -> None:
    staff = _staff_only()
    portal = _portal(staff).post("/teams/vision/policy/set/", {"max_gpu_milli_per_workload": "1"})
    api = _api(staff).put(
        "/api/v1/teams/vision/policy/", {"max_gpu_milli_per_workload": 1000}, format="json"
    )
    assert (portal.status_code, api.status_code) == (404, 404)
    assert not TeamPolicy.objects.exists()


def test_staff_without_a_platform_role_cannot_make_someone_a_lead(cast: Cast) -> None:
    staff = _staff_only()
    api = _api(staff).post(
        "/api/v1/teams/vision/members/", {"username": "owner", "role": "lead"}, format="json"
    )
    assert api.status_code == 404
    admin = _portal(staff)
    membership = Membership.objects.get(user=cast.owner, team=cast.team)
    assert admin.get(url(membership, "change", membership.pk)).status_code == 403
    membership.refresh_from_db()
    assert membership.role == Membership.Role.MEMBER


def test_staff_without_a_platform_role_sees_nothing_in_the_admin(cast: Cast) -> None:
    client = _portal(_staff_only())
    assert client.get("/admin/").status_code == 200  # the staff flag still lets them in
    for model in (Workload, Membership, TeamQuota, GpuClass, Cluster, NodeMaintenance):
        assert client.get(url(model, "changelist")).status_code == 403, model


# --- the auditor: reads everything, changes nothing ------------------------------------------


def test_auditor_sees_every_teams_workloads_usage_and_chargeback_in_the_portal(
    cast: Cast,
) -> None:
    notebook = _notebook(cast)
    client = _portal(_holder(Role.AUDITOR))
    listing = client.get("/workloads/").content.decode()
    assert "their-notebook" in listing and "all teams, as auditor" in listing
    assert "<dd>Auditor</dd>" in client.get("/accounts/profile/").content.decode()
    assert client.get(f"/workloads/{notebook.pk}/").status_code == 200
    assert client.get("/teams/vision/").status_code == 200
    assert client.get("/usage/teams/vision/").status_code == 200
    chargeback = client.get("/usage/chargeback/").content.decode()
    assert "Vision" in chargeback and "NLP" in chargeback
    assert client.get("/overview/").status_code == 200
    assert client.get("/usage/heatmap/").status_code == 200


def test_auditor_is_refused_every_write_in_the_portal_with_a_message(cast: Cast) -> None:
    notebook = _notebook(cast)
    client = _portal(_holder(Role.AUDITOR))
    refusals = {
        f"/workloads/{notebook.pk}/cancel/": ({}, "Only the owner, a team lead or an admin"),
        "/teams/vision/policy/set/": ({}, "Only platform admins set team policies."),
        "/overview/quotas/": ({}, "Only platform admins change quotas."),
        "/teams/vision/budget/set/": (
            {"month": month_label(this_month()), "amount": "10", "thresholds": "50, 100"},
            "Only platform admins and billing set budgets.",
        ),
    }
    for path, (data, message) in refusals.items():
        response = client.post(path, data)
        assert response.status_code == 403, path
        assert message in response.content.decode(), path
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING
    assert not TeamPolicy.objects.exists() and not Budget.objects.exists()


def test_auditor_reads_the_admin_but_changes_nothing_there(cast: Cast) -> None:
    notebook = _notebook(cast)
    client = _portal(_holder(Role.AUDITOR))
    listing = client.get(url(Workload, "changelist"))
    assert listing.status_code == 200
    assert "Cancel selected workloads" not in listing.content.decode()
    client.post(
        url(Workload, "changelist"),
        {"action": "cancel", "_selected_action": [notebook.pk], "index": 0},
    )
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING
    membership = Membership.objects.get(user=cast.owner, team=cast.team)
    assert client.get(url(membership, "change", membership.pk)).status_code == 200  # view only
    refused = client.post(url(membership, "change", membership.pk), {"role": "lead"})
    assert refused.status_code == 403
    membership.refresh_from_db()
    assert membership.role == Membership.Role.MEMBER
    assert client.get(url(Cluster, "add")).status_code == 403
    assert client.get(url(User, "changelist")).status_code == 200


# --- the operator: the capacity side ---------------------------------------------------------


def _node() -> ClusterNode:
    cluster = Cluster.objects.create(name="spoke", kubeconfig_path="/etc/kube/spoke", role="spoke")
    return ClusterNode.objects.create(cluster=cluster, name="gpu-7", gpu_count=8)


def test_operator_manages_maintenance_windows_and_clusters_in_the_admin(cast: Cast) -> None:
    node = _node()
    client = _portal(_holder(Role.OPERATOR))
    AdminForm.open(client, url(NodeMaintenance, "add")).set(
        node=node.pk,
        starts_at_0="2030-01-02",
        starts_at_1="08:00:00",
        ends_at_0="2030-01-02",
        ends_at_1="12:00:00",
        drain=True,
        reason="Firmware update",
    ).submit()
    assert NodeMaintenance.objects.get(node=node).drain is True
    AdminForm.open(client, url(node.cluster, "change", node.cluster.pk)).set(
        kubeconfig_context="spoke-admin"
    ).submit()
    assert Cluster.objects.get(pk=node.cluster.pk).kubeconfig_context == "spoke-admin"
    assert client.get(url(ClusterNode, "changelist")).status_code == 200


def test_operator_sees_capacity_not_other_teams_workloads_policies_or_budgets(
    cast: Cast,
) -> None:
    notebook = _notebook(cast)
    client = _portal(_holder(Role.OPERATOR))
    assert client.get("/usage/heatmap/").status_code == 200
    assert "their-notebook" not in client.get("/workloads/").content.decode()
    assert client.get(f"/workloads/{notebook.pk}/").status_code == 404
    assert client.post("/teams/vision/policy/set/", {}).status_code == 404
    assert client.get("/teams/vision/budget/").status_code == 404
    for model in (Workload, Membership, TeamQuota):
        assert client.get(url(model, "changelist")).status_code == 403, model


# --- billing: budgets, prices, chargeback ----------------------------------------------------


def test_billing_sets_a_teams_budget_and_reads_every_teams_chargeback(cast: Cast) -> None:
    client = _portal(_holder(Role.BILLING))
    assert client.get("/teams/vision/budget/").status_code == 200
    response = client.post(
        "/teams/vision/budget/set/",
        {"month": month_label(this_month()), "amount": "250", "thresholds": "50, 100"},
    )
    assert response.status_code == 302
    assert Budget.objects.get(team=cast.team).amount == Decimal("250")
    chargeback = client.get("/usage/chargeback/").content.decode()
    assert "Vision" in chargeback and "NLP" in chargeback


def test_billing_cannot_cancel_workloads_or_change_quotas(cast: Cast) -> None:
    notebook = _notebook(cast)
    client = _portal(_holder(Role.BILLING))
    assert client.post(f"/workloads/{notebook.pk}/cancel/").status_code == 404
    quota = client.post("/overview/quotas/", {})
    assert quota.status_code == 403
    assert "Only platform admins change quotas." in quota.content.decode()
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING
    assert client.get(url(TeamQuota, "changelist")).status_code == 403


def test_billing_changes_a_classs_price_and_nothing_else_in_the_admin(cast: Cast) -> None:
    gpu_class = cast.gpu_class
    client = _portal(_holder(Role.BILLING))
    AdminForm.open(client, url(gpu_class, "change", gpu_class.pk)).set(
        hourly_cost="4.25", name="renamed", sharing_mode="timeslice"
    ).submit()
    gpu_class.refresh_from_db()
    assert gpu_class.hourly_cost == Decimal("4.25")
    assert gpu_class.name != "renamed" and gpu_class.sharing_mode == "whole"


def test_the_catalog_services_ask_the_rule_too(cast: Cast) -> None:
    billing, operator = _holder(Role.BILLING), _holder(Role.OPERATOR)
    gpu_class = GpuClass.objects.get(pk=cast.gpu_class.pk)
    gpu_class.sharing_mode = "timeslice"
    gpu_class.timeslice_replicas = 4
    with pytest.raises(PermissionDenied, match="operator"):
        gpu_class_save(actor=billing, gpu_class=gpu_class)
    gpu_class = GpuClass.objects.get(pk=cast.gpu_class.pk)
    gpu_class.hourly_cost = Decimal("9")
    with pytest.raises(PermissionDenied, match="billing"):
        gpu_class_save(actor=operator, gpu_class=gpu_class)
    gpu_class_save(actor=billing, gpu_class=gpu_class)
    with pytest.raises(PermissionDenied):
        cluster_save(actor=billing, cluster=Cluster(name="x", kubeconfig_path="/x"))
    cluster_save(actor=operator, cluster=Cluster(name="x", kubeconfig_path="/x"))


# --- several roles -----------------------------------------------------------------------------


def test_someone_with_two_roles_may_do_what_either_may(cast: Cast) -> None:
    both = UserFactory(username="ops-and-bills", roles=[Role.OPERATOR, Role.BILLING])
    client = _portal(both)
    assert client.get(url(NodeMaintenance, "add")).status_code == 200
    assert client.get("/teams/vision/budget/").status_code == 200
    assert client.get(url(Workload, "changelist")).status_code == 403


def test_platform_admin_still_does_everything(cast: Cast) -> None:
    notebook = _notebook(cast)
    start = timezone.now() + timedelta(days=1)
    client = _portal(cast.admin)
    assert "their-notebook" in client.get("/workloads/").content.decode()
    assert client.get(url(Workload, "changelist")).status_code == 200
    assert client.get(url(NodeMaintenance, "add")).status_code == 200
    NodeMaintenance.objects.create(node=_node(), starts_at=start, ends_at=start, reason="x")
    assert client.post(f"/workloads/{notebook.pk}/cancel/").status_code == 302
