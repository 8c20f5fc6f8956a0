"""Which catalog images a cluster's nodes hold (node.status.images, recorded by the inventory),
said by the image picker, the API's images list and the CLI, and a request for one that the
class's nodes lack refused with a field message at every door; nodes that report no images at
all (the simulated ones) make it "unknown", never a refusal."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from apps.catalog import core
from apps.catalog.models import Cluster, ClusterNode, Image
from apps.catalog.selectors import image_availability
from apps.orchestration import services
from apps.orchestration.watch import node_signature
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.factories import ImageFactory
from tests.plugins.cast import Cast

# --- pure: names and where they are -------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "node_name"),
    [
        ("nvcr.io/nvidia/pytorch:24.12-py3", "nvcr.io/nvidia/pytorch:24.12-py3"),
        ("python:3.12", "docker.io/library/python:3.12"),
        ("pytorch/pytorch", "docker.io/pytorch/pytorch:latest"),
        ("docker.io/library/busybox", "busybox:latest"),
        ("localhost:5000/team/train:1", "localhost:5000/team/train:1"),
        (f"ghcr.io/o/i:2@sha256:{'a' * 64}", f"ghcr.io/o/i@sha256:{'a' * 64}"),
    ],
)
def test_a_reference_matches_the_names_a_node_reports_for_it(
    reference: str, node_name: str
) -> None:
    assert core.reference_keys(reference) & core.reference_keys(node_name)


def test_other_tags_and_repositories_do_not_match() -> None:
    assert not core.reference_keys("python:3.12") & core.reference_keys("python:3.11")
    assert not core.reference_keys("ghcr.io/a/train:1") & core.reference_keys("ghcr.io/b/train:1")


def test_each_cluster_is_available_missing_or_unknown() -> None:
    nodes = [
        core.NodeImages("onprem", "n1", ("reg.local/train:1", "reg.local/notebook:1")),
        core.NodeImages("onprem", "n2", ("reg.local/notebook:1",)),
        core.NodeImages("sim", "fake-0", ()),  # reports none
    ]
    found = core.images_on_clusters(
        {"train": "reg.local/train:1", "other": "reg.local/other:1"}, nodes
    )
    assert found["train"] == (
        core.ImageOnCluster("onprem", core.IMAGE_AVAILABLE, 1, 2),
        core.ImageOnCluster("sim", core.IMAGE_UNKNOWN, 0, 0),
    )
    assert found["other"][0].status == core.IMAGE_MISSING
    # A node that reports nothing may hold it: unknown, unless another node has it.
    mixed = [*nodes[:2], core.NodeImages("onprem", "fake-1", ())]
    found = core.images_on_clusters({"train": "reg.local/train:1", "other": "x:1"}, mixed)
    assert found["train"] == (core.ImageOnCluster("onprem", core.IMAGE_AVAILABLE, 1, 2),)
    assert found["other"] == (core.ImageOnCluster("onprem", core.IMAGE_UNKNOWN, 0, 2),)


# --- recorded by the inventory -------------------------------------------------------------------


def gpu_node(name: str, images: list[list[str]] | None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    if images is not None:
        status["images"] = [{"names": names, "sizeBytes": 1} for names in images]
    return {
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "8",
            },
        },
        "spec": {},
        "status": status,
    }


@pytest.mark.django_db
def test_the_inventory_records_every_name_of_each_nodes_images(cast: Cast) -> None:
    cluster = Cluster.objects.create(name="onprem", kubeconfig_path="/nowhere")
    services.cluster_inventory_store(
        cluster=cluster,
        nodes=[
            gpu_node("real-0", [["reg.local/train@sha256:" + "b" * 64, "reg.local/train:1"]]),
            gpu_node("fake-0", None),
        ],
    )
    real = ClusterNode.objects.get(name="real-0")
    assert real.images == ["reg.local/train:1", "reg.local/train@sha256:" + "b" * 64]
    assert ClusterNode.objects.get(name="fake-0").images == []
    # An image pulled or removed is a change the watch brings to the inventory.
    before = node_signature(gpu_node("real-0", [["reg.local/train:1"]]))
    assert before != node_signature(gpu_node("real-0", [["reg.local/train:1"], ["x:1"]]))


# --- said at every door --------------------------------------------------------------------------


def nodes_on(cast: Cast, cluster: str, images: list[str], count: int = 1) -> None:
    hub, _ = Cluster.objects.get_or_create(name=cluster, defaults={"connection": "in_cluster"})
    for i in range(count):
        ClusterNode.objects.create(
            cluster=hub,
            name=f"{cluster}-{i}",
            gpu_class=cast.gpu_class,
            gpu_count=8,
            cpu_milli=192_000,
            memory_mib=2_000_000,
            images=images,
        )


def submit(cast: Cast, image: Image) -> Workload:
    return workload_submit(
        actor=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=image,
        request=WorkloadRequest.of(
            kind="training", name="train", gpu_milli=1000, command=["python", "train.py"]
        ),
    )


@pytest.fixture
def catalog(cast: Cast) -> dict[str, Image]:
    return {
        "held": ImageFactory(name="Held", reference="reg.local/train:1", kind="training"),
        "lacking": ImageFactory(name="Lacking", reference="reg.local/other:2", kind="training"),
        "notebook": ImageFactory(name="Notebook", reference="reg.local/train:1", kind="notebook"),
    }


@pytest.mark.django_db
def test_a_request_for_an_image_the_classs_nodes_lack_is_refused_naming_those_there(
    cast: Cast, catalog: dict[str, Image]
) -> None:
    nodes_on(cast, "onprem", ["reg.local/train:1", "docker.io/library/python:3.12"])
    with pytest.raises(ValidationError) as refused:
        submit(cast, catalog["lacking"])
    assert refused.value.message_dict["image"] == [
        "The image Lacking is not available on cluster onprem; available: Held."
    ]
    assert not Workload.objects.exists()
    assert submit(cast, catalog["held"]).state == "pending"


@pytest.mark.django_db
def test_nodes_that_report_no_images_are_unknown_and_never_refuse(
    cast: Cast, catalog: dict[str, Image]
) -> None:
    nodes_on(cast, "sim", [])
    assert image_availability([catalog["lacking"]])["Lacking"] == (
        core.ImageOnCluster("sim", core.IMAGE_UNKNOWN, 0, 0),
    )
    assert submit(cast, catalog["lacking"]).state == "pending"
    # One cluster without it and one that says nothing: it may run on the second.
    nodes_on(cast, "onprem", ["reg.local/train:1"])
    assert submit(cast, catalog["lacking"]).state == "pending"


@pytest.mark.django_db
def test_the_api_lists_where_each_image_is_and_refuses_a_request_for_a_missing_one(
    cast: Cast, catalog: dict[str, Image]
) -> None:
    nodes_on(cast, "onprem", ["reg.local/train:1"], count=2)
    nodes_on(cast, "sim", [])
    api = APIClient()
    api.force_authenticate(cast.owner)
    listed = {i["name"]: i["availability"] for i in api.get("/api/v1/images/").json()}
    assert listed["Held"] == [
        {"cluster": "onprem", "status": "available", "nodes": 2, "reporting": 2},
        {"cluster": "sim", "status": "unknown", "nodes": 0, "reporting": 0},
    ]
    assert listed["Lacking"][0] == {
        "cluster": "onprem",
        "status": "missing",
        "nodes": 0,
        "reporting": 2,
    }
    by_class = api.get("/api/v1/images/", {"gpu_class": cast.gpu_class.name}).json()
    assert {i["name"]: len(i["availability"]) for i in by_class}["Held"] == 2
    assert api.get("/api/v1/images/", {"gpu_class": "nope"}).status_code == 404

    ClusterNode.objects.filter(cluster__name="sim").delete()
    body = {
        "kind": "training",
        "name": "t",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": "Lacking",
        "gpu_milli": 1000,
        "command": ["python"],
    }
    refused = api.post("/api/v1/workloads/", body, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["image"] == [
        "The image Lacking is not available on cluster onprem; available: Held."
    ]
    dry = api.post("/api/v1/workloads/validate/", body, format="json")
    assert dry.status_code == 400 and "image" in dry.json()["fields"]


@pytest.mark.django_db
def test_the_image_picker_says_where_each_image_is_and_the_form_refuses_a_missing_one(
    cast: Cast, catalog: dict[str, Image]
) -> None:
    nodes_on(cast, "onprem", ["reg.local/train:1"])
    portal = Client()
    portal.force_login(cast.owner)
    page = portal.get("/workloads/new/training/").content.decode()
    assert "Held — on onprem</option>" in page
    assert "Lacking — not available on onprem</option>" in page
    fields = {
        "action": "submit",
        "name": "t",
        "team": str(cast.team.pk),
        "gpu_class": str(cast.gpu_class.pk),
        "image": str(catalog["lacking"].pk),
        "gpu_milli": "1000",
        "replicas": "1",
        "command": "python train.py",
    }
    refused = portal.post("/workloads/new/training/", fields)
    assert refused.status_code == 400
    assert refused.context["form"].errors["image"] == [
        "The image Lacking is not available on cluster onprem; available: Held."
    ]
