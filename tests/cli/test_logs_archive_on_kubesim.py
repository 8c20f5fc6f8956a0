"""``gpupaas logs`` and ``gpupaas events`` for a job that failed on the simulated cluster
(deploy/kubesim) and whose objects are gone: the archive answers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
from tests.cli.conftest import Cli
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

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def team(kubesim: Kubesim, kube_api_client: Any, transactional_db: None) -> Iterator[Team]:
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


def test_logs_and_events_of_a_failed_job_are_printed_after_its_objects_are_gone(
    team: Team, cli_for: Callable[..., Cli], kube_api_client: Any
) -> None:
    owner = UserFactory(username="cli-owner")
    MembershipFactory(user=owner, team=team)
    workload: Workload = WorkloadFactory(
        team=team,
        owner=owner,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        placement={},  # any node with a free GPU: earlier tests may still hold h100-0
        params={"pod_annotations": {"kubesim.io/exit-code": "3", "kubesim.io/run-duration": "2s"}},
    )
    services.workload_reconcile(workload_id=workload.pk)
    cluster = Cluster.objects.get(name="sim")

    def failed() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.FAILED

    wait_for(failed, timeout=90)
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    core_api = k8s.CoreV1Api(kube_api_client)
    wait_for(
        lambda: not core_api.list_namespaced_pod(team.namespace, label_selector=selector).items,
        timeout=40,
    )

    cli = cli_for(owner, ("read",))
    logs = cli("logs", str(workload.pk), "--tail", "1000")
    assert logs.exit_code == 0, logs.output
    assert "main started nvcr.io/nvidia/pytorch" in logs.stdout.splitlines()[0]
    assert logs.stdout.splitlines()[-1].endswith("exited with code 3")
    # Following an ended workload prints its archived log and stops.
    followed = cli("logs", str(workload.pk), "-f", "--attempt", "1")
    assert followed.exit_code == 0, followed.output
    assert followed.stdout.splitlines()[-1].endswith("exited with code 3")
    events = cli("events", str(workload.pk))
    assert events.exit_code == 0, events.output
    assert "exited with code 3" in events.stdout  # the failure, as a state change
    assert "Scheduled" in events.stdout  # and the cluster's events, from the archive
