"""Two real control planes side by side: a workload runs on the cluster that offers its class."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.catalog.models import Cluster, GpuClass
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from deploy.devtools import kubesim as ks
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory
from tests.plugins.kubesim import portal_view
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]

B200_TOPOLOGY = """
pools:
  - name: b200
    count: 1
    gpu: {count: 8, product: NVIDIA-B200, memoryMiB: 183359}
"""


@pytest.fixture(scope="module")
def second_cluster(
    kubesim_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ks.Kubesim]:
    data = tmp_path_factory.mktemp("kubesim-b")
    topology = data / "b200.yaml"
    topology.write_text(B200_TOPOLOGY)
    with ks.start(data / "cluster", topology=topology) as cluster:
        yield portal_view(cluster)


def jobs_on(kubeconfig: Path, namespace: str, workload: Workload) -> list[Any]:
    api = k8s.BatchV1Api(k8s_config.new_client_from_config(config_file=str(kubeconfig)))
    return api.list_namespaced_job(
        namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
    ).items


def test_each_workload_runs_on_the_cluster_offering_its_class(
    kubesim: ks.Kubesim, second_cluster: ks.Kubesim
) -> None:
    forget_clients()
    a = Cluster.objects.create(name="a", kubeconfig_path=str(kubesim.kubeconfig))
    b = Cluster.objects.create(name="b", kubeconfig_path=str(second_cluster.kubeconfig))
    h100 = GpuClass.objects.create(
        name="H100", product_label="NVIDIA-H100-80GB-HBM3", memory_mib=81559
    )
    b200 = GpuClass.objects.create(name="B200", product_label="NVIDIA-B200", memory_mib=183359)
    team = TeamFactory()
    owner = UserFactory()
    team.memberships.create(user=owner)
    for gpu_class in (h100, b200):
        TeamQuotaFactory(team=team, gpu_class=gpu_class, guaranteed_milli=2000, limit_milli=4000)
    assert services.team_namespace_ensure(team=team) == ["a", "b"]
    services.cluster_inventory_sync(cluster=a)
    services.cluster_inventory_sync(cluster=b)
    h100.refresh_from_db()
    b200.refresh_from_db()
    assert (h100.capacity_gpus, b200.capacity_gpus) == (32, 8)

    image = ImageFactory()
    submitted = {
        gpu_class.name: workload_submit(
            actor=owner,
            team=team,
            gpu_class=gpu_class,
            image=image,
            request=WorkloadRequest.of(
                kind="training",
                name=f"on-{gpu_class.name}",
                gpu_milli=1000,
                command=["python", "train.py"],
                params={"pod_annotations": {"kubesim.io/run-duration": "1h"}},
            ),
        )
        for gpu_class in (h100, b200)
    }
    scheduling_cycle_run()
    for workload in submitted.values():
        workload.refresh_from_db()
        assert workload.state == wl.ADMITTED, workload.last_reason
        services.workload_reconcile(workload_id=workload.pk)
    assert submitted["H100"].cluster == a
    assert submitted["B200"].cluster == b
    assert len(jobs_on(kubesim.kubeconfig, team.namespace, submitted["H100"])) == 1
    assert jobs_on(second_cluster.kubeconfig, team.namespace, submitted["H100"]) == []
    assert len(jobs_on(second_cluster.kubeconfig, team.namespace, submitted["B200"])) == 1
    assert jobs_on(kubesim.kubeconfig, team.namespace, submitted["B200"]) == []

    def both_running() -> bool:
        services.status_sync_pass(cluster=a)
        services.status_sync_pass(cluster=b)
        return all(Workload.objects.get(pk=w.pk).state == wl.RUNNING for w in submitted.values())

    wait_for(both_running)
    # A pass on one cluster never deletes the other cluster's workloads as orphans.
    services.reconcile_pass(cluster=a)
    services.reconcile_pass(cluster=b)
    assert len(jobs_on(second_cluster.kubeconfig, team.namespace, submitted["B200"])) == 1
    assert len(jobs_on(kubesim.kubeconfig, team.namespace, submitted["H100"])) == 1
