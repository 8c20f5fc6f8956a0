"""Logs and events of a workload placed on the simulated cluster (deploy/kubesim), through
the API. The fake kubelet serves no container logs: the API must say so with a 409 in the
error shape, never fail with a 500."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
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
def team(kubesim: Kubesim, kube_api_client: Any) -> Iterator[Team]:
    forget_clients()
    Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_logs_stream_from_kubesim_and_a_missing_replica_is_a_clear_409(
    team: Team, api: Client, kube_api_client: Any
) -> None:
    owner = UserFactory()
    MembershipFactory(user=owner, team=team)
    workload: Workload = WorkloadFactory(
        team=team,
        owner=owner,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        placement={"replicas": [{"node": "h100-0"}]},
        params={"pod_annotations": {"kubesim.io/run-duration": "60s"}},
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    core_api = k8s.CoreV1Api(kube_api_client)
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    wait_for(
        lambda: any(
            p.status.phase == "Running"
            for p in core_api.list_namespaced_pod(team.namespace, label_selector=selector).items
        )
    )
    client = api(owner, ("read",))
    url = f"/api/v1/workloads/{workload.pk}/logs/"

    tail = client.get(f"{url}?tail=10")
    assert tail.status_code == 200
    text = b"".join(tail.streaming_content).decode()  # type: ignore[arg-type]
    assert "main started nvcr.io/nvidia/pytorch" in text.splitlines()[0]

    followed = client.get(f"{url}?tail=1&follow=true")
    assert followed.status_code == 200
    first = next(iter(followed.streaming_content))  # type: ignore[arg-type]
    assert b"kubesim:" in first  # more would follow for the minute the container runs

    missing = client.get(f"{url}?replica=5")
    assert missing.status_code == 409
    assert missing.json() == {
        "code": "logs_unavailable",
        "message": "Replica 5 does not exist; there are 1.",
        "fields": {},
    }
    events = client.get(f"/api/v1/workloads/{workload.pk}/events/").json()
    assert events["cluster_events_unavailable"] is None
    assert any(e["object"].startswith("Pod/") for e in events["cluster_events"])
