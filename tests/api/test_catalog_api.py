from __future__ import annotations

import pytest

from apps.catalog.models import Cluster, ClusterNode
from apps.workloads import core
from tests.api.conftest import Client
from tests.factories import GpuClassFactory, ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_free_capacity_falls_back_to_the_admin_figure_without_inventory(
    cast: Cast, api: Client
) -> None:
    WorkloadFactory(
        team=cast.team, gpu_class=cast.gpu_class, gpu_milli=2000, replicas=2, state=core.RUNNING
    )
    WorkloadFactory(team=cast.team, gpu_class=cast.gpu_class, gpu_milli=1000, state=core.QUEUED)
    [row] = api(cast.owner, ("read",)).get("/api/v1/gpu-classes/").json()
    assert row["name"] == "H100-80GB"
    assert (row["capacity_milli"], row["used_milli"], row["free_milli"]) == (32000, 4000, 28000)
    assert row["nodes"] == 0


def test_free_capacity_counts_ready_nodes_of_enabled_clusters(cast: Cast, api: Client) -> None:
    live = Cluster.objects.create(name="live", kubeconfig_path="/k")
    off = Cluster.objects.create(name="off", kubeconfig_path="/k", enabled=False)
    ClusterNode.objects.create(cluster=live, name="a", gpu_class=cast.gpu_class, gpu_count=8)
    ClusterNode.objects.create(cluster=live, name="b", gpu_class=cast.gpu_class, gpu_count=4)
    ClusterNode.objects.create(
        cluster=live, name="down", gpu_class=cast.gpu_class, gpu_count=8, ready=False
    )
    ClusterNode.objects.create(cluster=off, name="c", gpu_class=cast.gpu_class, gpu_count=8)
    for state in (core.ADMITTED, core.STARTING, core.RUNNING, core.SUCCEEDED, core.PENDING):
        WorkloadFactory(team=cast.team, gpu_class=cast.gpu_class, gpu_milli=1000, state=state)
    row = api(cast.owner).get("/api/v1/gpu-classes/H100-80GB/").json()
    assert (row["capacity_milli"], row["used_milli"], row["free_milli"]) == (12000, 3000, 9000)
    assert row["nodes"] == 2


def test_disabled_classes_and_images_are_not_offered(cast: Cast, api: Client) -> None:
    GpuClassFactory(name="K80", enabled=False)
    ImageFactory(name="old", enabled=False)
    client = api(cast.owner)
    assert [c["name"] for c in client.get("/api/v1/gpu-classes/").json()] == ["H100-80GB"]
    assert client.get("/api/v1/gpu-classes/K80/").status_code == 404
    assert [i["name"] for i in client.get("/api/v1/images/").json()] == ["PyTorch training"]


def test_quotas_show_use_and_borrowing(cast: Cast, api: Client) -> None:
    WorkloadFactory(team=cast.team, gpu_class=cast.gpu_class, gpu_milli=5000, state=core.RUNNING)
    WorkloadFactory(team=cast.other_team, gpu_class=cast.gpu_class, state=core.RUNNING)
    rows = api(cast.owner).get("/api/v1/quotas/").json()
    assert rows == [
        {
            "team": "vision",
            "gpu_class": "H100-80GB",
            "guaranteed_milli": 4000,
            "limit_milli": 8000,
            "used_milli": 5000,
            "borrowed_milli": 1000,
            "free_milli": 3000,
        }
    ]
    assert api(cast.owner).get("/api/v1/teams/vision/quotas/").json() == rows
