"""Archive before delete against the real control plane of deploy/kubesim: a cancelled
multi-node job keeps each replica's log separately once its objects are gone."""

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
from apps.orchestration.models import WorkloadArchive, WorkloadLogArchive
from apps.orchestration.selectors import archived_log, workload_cluster_events
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
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
    TeamQuotaFactory(
        team=team, gpu_class=GpuClassFactory(), guaranteed_milli=4000, limit_milli=8000
    )
    services.team_namespace_ensure(team=team)
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_cancelled_two_replica_job_archives_each_replica_separately(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    workload: Workload = WorkloadFactory(
        team=team,
        owner=UserFactory(),
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        replicas=2,
        gpu_milli=1000,
        # No node names: the scheduler of the simulated cluster spreads the two replicas
        # (one per node, by the manifests' anti-affinity).
        placement={},
        params={"pod_annotations": {"kubesim.io/run-duration": "10m"}},
    )
    outcome = services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    assert outcome == "ensured", workload.last_reason
    core_api = k8s.CoreV1Api(kube_api_client)
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"

    def pods() -> list[Any]:
        return list(core_api.list_namespaced_pod(team.namespace, label_selector=selector).items)

    def both_running() -> bool:
        services.status_sync_pass(cluster=cluster)
        return len([p for p in pods() if p.status.phase == "Running"]) == 2

    wait_for(both_running, timeout=90)
    names = {
        int(p.metadata.annotations["batch.kubernetes.io/job-completion-index"]): p.metadata.name
        for p in pods()
    }
    wait_for(
        lambda: all(core_api.read_namespaced_pod_log(n, team.namespace) for n in names.values())
    )

    Workload.objects.filter(pk=workload.pk).update(state=wl.CANCELLED)
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    wait_for(lambda: not pods(), timeout=90)

    rows = list(WorkloadLogArchive.objects.filter(workload=workload).order_by("replica"))
    assert [(r.replica, r.attempt, r.pod_name) for r in rows] == [
        (0, 1, names[0]),
        (1, 1, names[1]),
    ]
    for row in rows:
        assert f"{row.pod_name}/main started" in row.text.splitlines()[0], row.text
    workload.refresh_from_db()
    assert archived_log(workload=workload, replica=1) == rows[1]
    events = workload_cluster_events(workload=workload)
    assert events.archived
    assert {f"Pod/{names[0]}", f"Pod/{names[1]}"} <= {e.object for e in events.events}

    # Another pass finds nothing left to read, and duplicates nothing.
    services.workload_reconcile(workload_id=workload.pk)
    assert WorkloadLogArchive.objects.filter(workload=workload).count() == 2
    assert WorkloadArchive.objects.filter(workload=workload).count() == 1
