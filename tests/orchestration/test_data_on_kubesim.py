"""Team data on the simulated cluster: the team namespace gets its ReadWriteMany volume and a
storage quota; a job that names a claim dataset has the team volume at /team, the dataset
read-only at /datasets/<name> and its output and checkpoint directories under /team; another
team's dataset is refused at submit with nothing created."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster, GpuClass
from apps.datasets.services import dataset_register
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory
from tests.waiting import wait_for
from tests.workloads.submitting import submit_fields

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def core_api(kube_api_client: Any) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_api_client)


def _drop(core_api: k8s.CoreV1Api, namespace: str) -> None:
    try:
        core_api.delete_namespace(namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def team(cluster: Cluster, core_api: k8s.CoreV1Api) -> Iterator[Team]:
    team = TeamFactory()
    services.team_namespace_ensure(team=team)
    yield team
    _drop(core_api, team.namespace)


def test_team_namespace_has_a_read_write_many_volume_and_a_storage_quota(
    team: Team, core_api: k8s.CoreV1Api
) -> None:
    claim = core_api.read_namespaced_persistent_volume_claim(m.team_claim_name(), team.namespace)
    assert claim.spec.access_modes == ["ReadWriteMany"]
    assert claim.spec.resources.requests["storage"] == settings.TEAM_VOLUME_SIZE
    assert claim.metadata.labels[m.LABEL_TEAM] == team.slug
    quota = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace)
    assert quota.spec.hard["requests.storage"] == settings.TEAM_STORAGE_QUOTA
    assert quota.spec.hard["count/persistentvolumeclaims"] == str(settings.TEAM_MAX_VOLUME_CLAIMS)

    def counted() -> bool:
        used = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).status.used
        return bool(used) and used.get("requests.storage") == settings.TEAM_VOLUME_SIZE

    # The quota counts the team volume against the team's storage.
    wait_for(counted, timeout=40)
    # Ensuring again changes nothing and keeps the one claim.
    services.team_namespace_ensure(team=team)
    names = [
        c.metadata.name
        for c in core_api.list_namespaced_persistent_volume_claim(team.namespace).items
    ]
    assert names == [m.team_claim_name()]


def test_job_mounts_the_team_volume_and_a_dataset_read_only(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api
) -> None:
    lead, member = UserFactory(), UserFactory()
    team.memberships.create(user=lead, role=Membership.Role.LEAD)
    team.memberships.create(user=member)
    core_api.create_namespaced_persistent_volume_claim(
        team.namespace,
        {
            "metadata": {"name": "imagenet-pvc"},
            "spec": {
                "accessModes": ["ReadOnlyMany"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        },
    )
    dataset_register(actor=lead, team=team, name="imagenet", kind="claim", claim="imagenet-pvc")
    other = TeamFactory()
    other_lead = UserFactory()
    other.memberships.create(user=other_lead, role=Membership.Role.LEAD)
    dataset_register(actor=other_lead, team=other, name="private", kind="claim", claim="p")

    timeslice = GpuClass.objects.create(
        name="L40S",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
        capacity_gpus=8,
    )
    TeamQuotaFactory(team=team, gpu_class=timeslice, guaranteed_milli=2000, limit_milli=4000)
    services.cluster_inventory_sync(cluster=cluster)
    request: dict[str, Any] = {
        "actor": member,
        "team": team,
        "kind": "training",
        "name": "with-data",
        "gpu_class": timeslice,
        "image": ImageFactory(),
        "gpu_milli": 250,
        "command": ["python", "train.py"],
        "params": {"pod_annotations": {"kubesim.io/run-duration": "60s"}},
    }
    with pytest.raises(ValidationError) as refused:
        submit_fields(**request, datasets=["private"])
    assert "No dataset named “private”" in refused.value.message_dict["datasets"][0]
    assert not Workload.objects.exists()

    workload = submit_fields(**request, datasets=["imagenet"])
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    services.workload_reconcile(workload_id=workload.pk)

    def pods() -> list[Any]:
        return core_api.list_namespaced_pod(
            team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ).items

    # Scheduled: both claims bound and the pod placed on a node.
    wait_for(lambda: bool(pods()) and bool(pods()[0].spec.node_name), timeout=60)
    pod = pods()[0]
    volumes = {v.name: v.persistent_volume_claim for v in pod.spec.volumes}
    assert volumes["team"].claim_name == m.team_claim_name()
    assert not volumes["team"].read_only
    assert (volumes["dataset-imagenet"].claim_name, volumes["dataset-imagenet"].read_only) == (
        "imagenet-pvc",
        True,
    )
    mounts = {v.mount_path: v for v in pod.spec.containers[0].volume_mounts}
    assert mounts["/team"].name == "team"
    assert (mounts["/datasets/imagenet"].name, mounts["/datasets/imagenet"].read_only) == (
        "dataset-imagenet",
        True,
    )
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["GPUPAAS_OUTPUT_DIR"] == f"/team/outputs/wl-{workload.pk}"
    assert env["GPUPAAS_CHECKPOINT_DIR"] == f"/team/checkpoints/wl-{workload.pk}"
