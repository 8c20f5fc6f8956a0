"""A job that fails on the simulated cluster (deploy/kubesim) still shows its log and its
events after its objects are gone: through the API and the portal, with the same team rules
(an outsider gets 404)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client as PortalClient
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team, User
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.orchestration.models import WorkloadLogArchive
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.api.conftest import Client
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    MembershipFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def team(cluster: Cluster, kube_api_client: Any) -> Iterator[Team]:
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def failed_and_cleaned_up(
    team: Team, cluster: Cluster, owner: User, kube_api_client: Any
) -> Workload:
    """A job whose command exits 3: it fails, and its objects are deleted."""
    workload: Workload = WorkloadFactory(
        team=team,
        owner=owner,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        placement={},  # any node with a free GPU: earlier tests may still hold h100-0
        params={"pod_annotations": {"kubesim.io/exit-code": "3", "kubesim.io/run-duration": "2s"}},
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"

    def failed() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.FAILED

    wait_for(failed, timeout=90)
    assert "exited with code 3" in workload.last_reason
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    core_api, batch_api = k8s.CoreV1Api(kube_api_client), k8s.BatchV1Api(kube_api_client)
    wait_for(
        lambda: not batch_api.list_namespaced_job(team.namespace, label_selector=selector).items
        and not core_api.list_namespaced_pod(team.namespace, label_selector=selector).items,
        timeout=40,
    )
    assert workload.k8s_objects == []
    return workload


def test_a_failed_jobs_log_and_events_outlive_its_objects_in_the_api_and_the_portal(
    team: Team, cluster: Cluster, api: Client, kube_api_client: Any
) -> None:
    owner, outsider = UserFactory(), UserFactory()
    MembershipFactory(user=owner, team=team)
    MembershipFactory(user=outsider, team=TeamFactory())
    workload = failed_and_cleaned_up(team, cluster, owner, kube_api_client)
    row = WorkloadLogArchive.objects.get(workload=workload)
    assert (row.replica, row.attempt, row.truncated) == (0, 1, False)

    client = api(owner, ("read",))
    logs = client.get(f"/api/v1/workloads/{workload.pk}/logs/?tail=1000")
    assert logs.status_code == 200
    lines = b"".join(logs.streaming_content).decode().splitlines()  # type: ignore[attr-defined]
    assert "main started nvcr.io/nvidia/pytorch" in lines[0]
    assert lines[-1].endswith("exited with code 3")
    events = client.get(f"/api/v1/workloads/{workload.pk}/events/").json()
    assert events["cluster_events_unavailable"] is None
    reasons = {e["reason"] for e in events["cluster_events"]}
    assert {"Scheduled", "SuccessfulCreate"} <= reasons
    download = client.get(f"/api/v1/workloads/{workload.pk}/logs/?download=true")
    assert download["Content-Disposition"] == (
        f'attachment; filename="workload-{workload.pk}-replica-0.log"'
    )

    portal = PortalClient()
    portal.force_login(owner)
    page = portal.get(f"/workloads/{workload.pk}/logs/").content.decode()
    assert "Archived log of replica 0, attempt 1" in page
    assert "exited with code 3" in page
    assert "Scheduled" in portal.get(f"/workloads/{workload.pk}/events/").content.decode()

    stranger = api(outsider, ("read",))
    assert stranger.get(f"/api/v1/workloads/{workload.pk}/logs/").status_code == 404
    assert stranger.get(f"/api/v1/workloads/{workload.pk}/events/").status_code == 404
    portal.force_login(outsider)
    assert portal.get(f"/workloads/{workload.pk}/logs/").status_code == 404
    assert portal.get(f"/workloads/{workload.pk}/logs/download/").status_code == 404
