"""Images on the simulated cluster's nodes: the fake nodes report none (unknown: never a
refusal); a node whose status lists images (as a real kubelet's does) makes the inventory, the
images list and the request rules say which catalog images it holds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from rest_framework.test import APIClient

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from deploy.devtools.kubesim import Kubesim
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]

NODE = "hami-0"  # the default topology's one HAMi node: the whole class


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def hami() -> GpuClass:
    return GpuClass.objects.create(
        name="A100-HAMi",
        product_label="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        sharing_mode="hami",
        hami_split_count=10,
    )


@pytest.fixture
def team(cluster: Cluster, hami: GpuClass, kube_api_client: Any) -> Iterator[Team]:
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=hami, guaranteed_milli=0, limit_milli=8000)
    yield team
    with contextlib.suppress(ApiException):
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)


@pytest.fixture
def reported(kube_api_client: Any) -> Iterator[Any]:
    """Set what the node reports it holds (the status a real kubelet writes); emptied after."""
    core = k8s.CoreV1Api(kube_api_client)

    def report(*names: str) -> None:
        body = {"status": {"images": [{"names": [n], "sizeBytes": 1000} for n in names]}}
        core.patch_node_status(NODE, body)

    yield report
    core.patch_node_status(NODE, {"status": {"images": []}})


def submit(team: Team, hami: GpuClass, reference: str) -> Any:
    owner = UserFactory()
    team.memberships.create(user=owner)
    return workload_submit(
        actor=owner,
        team=team,
        gpu_class=hami,
        image=ImageFactory(name=reference, reference=reference, kind="training"),
        request=WorkloadRequest.of(
            kind="training", name="t", gpu_milli=500, command=["python", "train.py"]
        ),
    )


def test_fake_nodes_report_no_images_so_availability_is_unknown_and_nothing_is_refused(
    cluster: Cluster, team: Team, hami: GpuClass
) -> None:
    services.cluster_inventory_sync(cluster=cluster)
    images = list(ClusterNode.objects.filter(cluster=cluster).values_list("images", flat=True))
    assert images and all(held == [] for held in images)
    assert submit(team, hami, "reg.local/anything:1").state == "pending"
    api = APIClient()
    api.force_authenticate(UserFactory())
    (image,) = [i for i in api.get("/api/v1/images/").json() if i["name"] == "reg.local/anything:1"]
    assert image["availability"] == [
        {"cluster": "sim", "status": "unknown", "nodes": 0, "reporting": 0}
    ]


def test_a_node_reporting_its_images_decides_what_its_class_may_run(
    cluster: Cluster, team: Team, hami: GpuClass, reported: Any
) -> None:
    reported("reg.local/train:1", "docker.io/library/python:3.12")
    services.cluster_inventory_sync(cluster=cluster)
    node = ClusterNode.objects.get(cluster=cluster, name=NODE)
    assert node.images == ["docker.io/library/python:3.12", "reg.local/train:1"]
    assert node.gpu_class == hami
    assert submit(team, hami, "reg.local/train:1").state == "pending"
    assert submit(team, hami, "python:3.12").state == "pending"  # the same image, named short
    with pytest.raises(ValidationError) as refused:
        submit(team, hami, "reg.local/other:2")
    (message,) = refused.value.message_dict["image"]
    assert message.startswith("The image reg.local/other:2 is not available on cluster sim; ")
    assert "available: " in message and "reg.local/train:1" in message
    api = APIClient()
    api.force_authenticate(UserFactory())
    listed = {
        i["name"]: i["availability"]
        for i in api.get("/api/v1/images/", {"gpu_class": hami.name}).json()
    }
    assert listed["reg.local/train:1"] == [
        {"cluster": "sim", "status": "available", "nodes": 1, "reporting": 1}
    ]
    assert listed["reg.local/other:2"][0]["status"] == "missing"
