"""GPUs through Dynamic Resource Allocation on the simulated cluster, through the real path.

kubesim's fake GPU nodes publish ResourceSlices the way NVIDIA's DRA driver does
(:mod:`deploy.devtools.dra`); a class an admin set to DRA gives each pod of its workloads a
ResourceClaim made from the workload's ResourceClaimTemplate, pinned to the GPUs the portal's
scheduler placed. The upstream scheduler then allocates exactly those devices: for a whole GPU,
for two, for a time-sliced GPU's share and for a MIG partition. The template goes with the
workload's other objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.selectors import ready_nodes
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.manifests.claims import POD_CLAIM
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_cancel, workload_submit
from deploy.devtools import dra
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture(autouse=True)
def _gpus_left_free(cluster: Cluster) -> Iterator[None]:  # noqa: F811 - the fixture's value
    """The cluster outlives each test's database: what a test left running is cancelled, so
    its claims do not hold the devices the next test's placements expect free."""
    yield
    for workload in Workload.objects.filter(state__in=wl.ACTIVE_STATES):
        workload_cancel(actor=workload.owner, workload=workload)
        services.workload_reconcile(workload_id=workload.pk)


@pytest.fixture
def custom(kube_api_client: Any) -> k8s.CustomObjectsApi:
    """The cluster as started: the DRA driver's DeviceClasses and every fake GPU node's
    ResourceSlices are published with it."""
    api = k8s.CustomObjectsApi(kube_api_client)
    classes = api.list_cluster_custom_object(GROUP, VERSION, "deviceclasses")["items"]
    assert {c["metadata"]["name"] for c in classes} >= {
        d["metadata"]["name"] for d in dra.device_classes()
    }
    return api


def device_uuids(custom: k8s.CustomObjectsApi) -> dict[tuple[str, str], str]:
    """(pool, device) -> the UUID attribute of every published device."""
    slices = custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]
    return {
        (s["spec"]["pool"]["name"], d["name"]): d["attributes"]["uuid"]["string"]
        for s in slices
        for d in s["spec"].get("devices") or []
        if "uuid" in (d.get("attributes") or {})
    }


def dra_class(name: str, **fields: Any) -> GpuClass:
    gpu_class = GpuClassFactory(name=name, **fields)
    GpuClass.objects.filter(pk=gpu_class.pk).update(allocation_mode=GpuClass.Allocation.DRA)
    gpu_class.refresh_from_db()
    return gpu_class


def admit(
    team: Team,  # noqa: F811 - the fixture's value
    cluster: Cluster,  # noqa: F811 - the fixture's value
    gpu_class: GpuClass,
    gpu_milli: int,
    replicas: int = 1,
) -> Workload:
    """A training job of ``gpu_class`` submitted by a new member, placed by the next cycle."""
    TeamQuota.objects.update_or_create(
        team=team, gpu_class=gpu_class, defaults={"guaranteed_milli": 8000, "limit_milli": 8000}
    )
    services.cluster_inventory_sync(cluster=cluster)
    owner = UserFactory()
    team.memberships.create(user=owner)
    workload = workload_submit(
        actor=owner,
        team=team,
        gpu_class=gpu_class,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name=f"dra-{gpu_class.name.lower()}",
            gpu_milli=gpu_milli,
            replicas=replicas,
            command=["python", "train.py"],
            params={"pod_annotations": {"kubesim.io/run-duration": "10m"}},
        ),
    )
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    assert workload.placement["allocation"] == GpuClass.Allocation.DRA
    return workload


def run(
    team: Team,  # noqa: F811 - the fixture's value
    cluster: Cluster,  # noqa: F811 - the fixture's value
    gpu_class: GpuClass,
    gpu_milli: int,
    replicas: int = 1,
) -> Workload:
    """Admitted, its objects created, and running."""
    workload = admit(team, cluster, gpu_class, gpu_milli, replicas)
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"

    def running() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    wait_for(running, timeout=40)
    return workload


def allocated(
    custom: k8s.CustomObjectsApi, api: k8s.CoreV1Api, workload: Workload
) -> tuple[Any, list[dict[str, Any]]]:
    """The workload's one pod and what the upstream scheduler allocated to its claim."""
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    (pod,) = api.list_namespaced_pod(workload.team.namespace, label_selector=selector).items
    (claim_ref,) = pod.status.resource_claim_statuses or []
    claim = custom.get_namespaced_custom_object(
        GROUP, VERSION, workload.team.namespace, "resourceclaims", claim_ref.resource_claim_name
    )
    return pod, claim["status"]["allocation"]["devices"]["results"]


def placed(workload: Workload) -> tuple[str, list[str]]:
    (replica,) = workload.placement["replicas"]
    return replica["node"], list(replica["gpu_uuids"])


def test_whole_gpus_are_the_devices_the_scheduler_placed(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
) -> None:
    workload = run(team, cluster, dra_class("H100-80GB"), 2000)
    pod, results = allocated(custom, core_api, workload)
    node, uuids = placed(workload)
    assert pod.spec.node_name == node
    # No extended resource beside the claim: the GPUs come from DRA alone.
    limits = pod.spec.containers[0].resources.limits or {}
    assert not any(k.startswith("nvidia.com/") for k in limits)
    assert [c.name for c in pod.spec.containers[0].resources.claims or []] == [POD_CLAIM]
    by_uuid = device_uuids(custom)
    assert {r["pool"] for r in results} == {node}
    assert sorted(by_uuid[(r["pool"], r["device"])] for r in results) == sorted(uuids)
    assert len(uuids) == 2

    # Ended: the claim template goes with the Job (and the claims with the pods).
    assert any(r["kind"] == "ResourceClaimTemplate" for r in workload.k8s_objects)
    workload_cancel(actor=workload.owner, workload=workload)
    services.workload_reconcile(workload_id=workload.pk)
    left = custom.list_namespaced_custom_object(
        GROUP, VERSION, team.namespace, "resourceclaimtemplates"
    )["items"]
    assert left == []


def test_a_time_sliced_share_is_capacity_of_the_placed_gpu(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
) -> None:
    shared = dra_class(
        "L40S-TS",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
    )
    workload = run(team, cluster, shared, 500)  # two of the GPU's four slices
    _, results = allocated(custom, core_api, workload)
    node, uuids = placed(workload)
    (result,) = results
    assert device_uuids(custom)[(result["pool"], result["device"])] == uuids[0]
    assert result["pool"] == node
    # Half of the GPU's memory, as the slices' capacity (the scheduler hands out no more).
    consumed = result.get("consumedCapacity") or {}
    assert consumed, result
    (amount,) = consumed.values()
    assert amount == f"{2 * (46068 // 4)}Mi"


def test_a_mig_partition_is_a_device_of_the_placed_profile_on_the_placed_gpu(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
) -> None:
    mig = dra_class(
        "A100-MIG",
        product_label="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        sharing_mode="mig",
        mig_profiles=["1g.10gb", "2g.20gb", "3g.40gb"],
    )
    workload = run(team, cluster, mig, 250)
    _, results = allocated(custom, core_api, workload)
    (replica,) = workload.placement["replicas"]
    (result,) = results
    slices = custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]
    device = next(
        d
        for s in slices
        if s["spec"]["pool"]["name"] == result["pool"]
        for d in s["spec"].get("devices") or []
        if d["name"] == result["device"]
    )
    assert result["pool"] == replica["node"]
    assert device["attributes"]["type"]["string"] == "mig"
    assert device["attributes"]["profile"]["string"] == replica["mig_profile"]
    assert device["attributes"]["parentUUID"]["string"] in replica["gpu_uuids"]


def test_a_gang_s_replicas_each_get_the_gpus_placed_on_their_own_node(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
) -> None:
    """One template for the gang, one claim per replica's pod: each claim is held to its own
    node by the pod and to the placed GPUs by the template's selector."""
    workload = run(team, cluster, dra_class("H100-80GB"), 1000, replicas=2)
    by_uuid = device_uuids(custom)
    placed_on = {r["node"]: set(r["gpu_uuids"]) for r in workload.placement["replicas"]}
    assert len(placed_on) == 2  # distinct nodes
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    pods = core_api.list_namespaced_pod(team.namespace, label_selector=selector).items
    assert len(pods) == 2
    for pod in pods:
        (claim_ref,) = pod.status.resource_claim_statuses or []
        claim = custom.get_namespaced_custom_object(
            GROUP, VERSION, team.namespace, "resourceclaims", claim_ref.resource_claim_name
        )
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == pod.spec.node_name
        assert by_uuid[(result["pool"], result["device"])] in placed_on[pod.spec.node_name]


def test_a_claim_whose_devices_are_not_published_waits_with_a_reason_in_words(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
    kube_api_client: Any,
) -> None:
    """The node's driver stopped publishing after the placement: the pod cannot be scheduled,
    and the workload says why in words, not only in the scheduler's."""
    workload = admit(team, cluster, dra_class("H100-80GB"), 1000)
    owner = workload.owner
    (replica,) = workload.placement["replicas"]
    slices = custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]
    mine = [s["metadata"]["name"] for s in slices if s["spec"]["pool"]["name"] == replica["node"]]
    assert mine
    try:
        for name in mine:
            custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", name)
        assert services.workload_reconcile(workload_id=workload.pk) == "ensured"

        def explained() -> str | None:
            services.status_sync_pass(cluster=cluster)
            workload.refresh_from_db()
            return workload.last_reason if "GPU claim (DRA)" in workload.last_reason else None

        reason = wait_for(explained, timeout=30)
        assert reason.startswith("Unschedulable: no free device on its node matches its GPU claim")
        assert "cannot allocate all claims" in reason
        assert workload.state in (wl.ADMITTED, wl.STARTING)  # waiting, not failed
    finally:
        workload_cancel(actor=owner, workload=workload)
        services.workload_reconcile(workload_id=workload.pk)
        dra.publish(kube_api_client)  # the node's slices again, for the tests after this one


def test_the_inventory_counts_each_node_s_published_devices_and_a_class_without_any_is_refused(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
    kube_api_client: Any,
) -> None:
    """A DRA class whose nodes publish nothing (its driver is not running there) is refused at
    submit with a message naming it, and its nodes take no new work; devices published again
    make it whole."""
    h100 = dra_class("H100-80GB")
    services.cluster_inventory_sync(cluster=cluster)
    nodes = ClusterNode.objects.filter(cluster=cluster, gpu_class=h100)
    assert nodes.count() == 4
    assert set(nodes.values_list("dra_devices", flat=True)) == {8}  # 8 GPUs each
    assert list(ready_nodes(h100)) != []
    owner = UserFactory()
    team.memberships.create(user=owner)

    def submit() -> Workload:
        return workload_submit(
            actor=owner,
            team=team,
            gpu_class=h100,
            image=ImageFactory(),
            request=WorkloadRequest.of(
                kind="training", name="x", gpu_milli=1000, command=["python", "train.py"]
            ),
        )

    slices = custom.list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]
    h100_nodes = set(nodes.values_list("name", flat=True))
    try:
        for piece in slices:
            if piece["spec"]["pool"]["name"] in h100_nodes:
                custom.delete_cluster_custom_object(
                    GROUP, VERSION, "resourceslices", piece["metadata"]["name"]
                )
        services.cluster_inventory_sync(cluster=cluster)
        assert set(nodes.values_list("dra_devices", flat=True)) == {0}
        assert list(ready_nodes(h100)) == []
        with pytest.raises(ValidationError) as refused:
            submit()
        (message,) = refused.value.message_dict["gpu_class"]
        assert message.startswith(
            "H100-80GB allocates GPUs through Dynamic Resource Allocation, but none of its "
            "nodes publishes devices"
        )
    finally:
        dra.publish(kube_api_client)
    services.cluster_inventory_sync(cluster=cluster)
    assert submit().state in (wl.PENDING, wl.QUEUED)  # accepted


def test_the_namespace_quota_caps_the_devices_the_teams_claims_request(
    team: Team,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,
) -> None:
    """The cluster's second ceiling for DRA classes: the namespace's ResourceQuota caps the
    devices its ResourceClaims request of the driver's device class, as it caps nvidia.com/gpu
    for the device plugin; the API server refuses a claim past it."""
    gpu_class = dra_class("H100-80GB-DRA")
    TeamQuota.objects.create(
        team=team, gpu_class=gpu_class, guaranteed_milli=1000, limit_milli=2000
    )
    services.team_namespace_ensure(team=team)
    quota = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace)
    key = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    assert quota.spec.hard[key] == "2"
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "8"  # the fixture's device-plugin class

    def claim(name: str, count: int) -> dict[str, Any]:
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}},
        }

    with pytest.raises(k8s.ApiException) as refused:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, team.namespace, "resourceclaims", claim("three", 3)
        )
    assert refused.value.status == 403
    assert "exceeded quota" in str(refused.value.body) and key in str(refused.value.body)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, team.namespace, "resourceclaims", claim("two", 2)
    )
    with pytest.raises(k8s.ApiException, match="exceeded quota"):
        custom.create_namespaced_custom_object(
            GROUP, VERSION, team.namespace, "resourceclaims", claim("one-more", 1)
        )
