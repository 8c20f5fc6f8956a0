"""Node health on devices, on the simulated cluster: a GPU that fails its health check gets a
DRA device taint (NoSchedule), one that fell off the bus NoExecute; only that device stops
taking work, not its node; the work on a GPU that fell off the bus returns to the queue with a
reason and starts on healthy GPUs.

The taint is checked through the components that enforce it: the upstream scheduler refuses
to allocate a tainted device to a claim, and kube-controller-manager's device taint eviction
controller deletes a running pod whose claim uses a device tainted NoExecute.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode
from apps.catalog.selectors import node_blockers
from apps.orchestration import services
from apps.orchestration.manifests.device_taints import TAINT_API_VERSION, TAINT_KEY
from apps.quotas.models import TeamQuota
from apps.scheduling import selectors
from apps.scheduling.services import gpu_fault_pass, scheduling_cycle_run
from apps.telemetry import core as telemetry
from apps.telemetry.services import node_health_store
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import workload_cancel
from tests.factories import UserFactory
from tests.orchestration.test_dra_on_kubesim import (  # noqa: F401
    GROUP,
    VERSION,
    custom,
    dra_class,
    run,
)
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
TAINT_GROUP, TAINT_VERSION = TAINT_API_VERSION.split("/")


def report(node: ClusterNode, **faulty: dict[str, Any]) -> None:
    """The node's exporter reports its GPUs (by the inventory's UUIDs), ``faulty`` by index."""
    gpus = [
        telemetry.GpuHealth(index=str(i), uuid=uuid, **faulty.get(str(i), {}))
        for i, uuid in enumerate(node.gpu_uuids)
    ]
    node_health_store({node.name: telemetry.NodeHealth(node.name, "dcgm-exporter", gpus)})
    node.refresh_from_db()


def rules(custom: k8s.CustomObjectsApi) -> dict[str, dict[str, Any]]:  # noqa: F811
    items = custom.list_cluster_custom_object(TAINT_GROUP, TAINT_VERSION, "devicetaintrules")
    return {
        r["spec"]["deviceSelector"]["device"] + "@" + r["spec"]["deviceSelector"]["pool"]: r
        for r in items["items"]
    }


def pinned_pod(
    custom: k8s.CustomObjectsApi,  # noqa: F811
    api: k8s.CoreV1Api,
    namespace: str,
    name: str,
    uuid: str,
) -> None:
    """A pod outside gpupaas whose claim asks for the one GPU ``uuid``."""
    selector = f'device.attributes["gpu.nvidia.com"].uuid == "{uuid}"'
    claim = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim)
    api.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "annotations": {"kubesim.io/run-duration": "30m"}},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 1000,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {"claims": [{"name": "gpu"}]},
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        },
    )


def delete_pod(api: k8s.CoreV1Api, namespace: str, name: str) -> None:
    try:
        api.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise


def pod_phase(api: k8s.CoreV1Api, namespace: str, name: str) -> str | None:
    try:
        pod = api.read_namespaced_pod(name, namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return str(pod.status.phase) if pod.spec.node_name else "Unscheduled"


def test_a_gpu_failing_its_check_is_tainted_no_schedule_and_its_node_keeps_working(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,  # noqa: F811 - the fixture
) -> None:
    h100 = dra_class("H100-80GB")
    services.cluster_inventory_sync(cluster=cluster)
    node = ClusterNode.objects.get(cluster=cluster, name="h100-0")
    bad = node.gpu_uuids[3]
    try:
        report(node, **{"3": {"ecc_dbe": 2}})
        assert node.health_verdict == "degraded"
        assert [(f["uuid"], f["index"], f["effect"]) for f in node.gpu_faults] == [
            (bad, "3", "NoSchedule")
        ]
        # The node still takes work, without that GPU.
        assert node.pk not in node_blockers([node], now=node.last_seen_at)
        (spec,) = [n for n in selectors.node_specs(h100) if n.name == "h100-0"]
        assert spec.down_gpus == (3,)
        browser = Client()
        browser.force_login(UserFactory(is_staff=True, is_superuser=True))
        page = browser.get("/admin/catalog/clusternode/").content.decode()
        assert "yes, except GPU 3 (NoSchedule: GPU 3" in page

        services.cluster_inventory_sync(cluster=cluster)
        tainted = rules(custom)
        assert set(tainted) == {"gpu-3@h100-0"}
        taint = tainted["gpu-3@h100-0"]["spec"]["taint"]
        assert (taint["key"], taint["value"], taint["effect"]) == (
            TAINT_KEY,
            "ecc-dbe",
            "NoSchedule",
        )

        # The upstream scheduler honours it: a claim for exactly that GPU is not allocated;
        # a claim for its healthy neighbour is.
        pinned_pod(custom, core_api, team.namespace, "wants-bad", bad)
        pinned_pod(custom, core_api, team.namespace, "wants-good", node.gpu_uuids[2])
        wait_for(lambda: pod_phase(core_api, team.namespace, "wants-good") == "Running", timeout=40)
        assert pod_phase(core_api, team.namespace, "wants-bad") == "Unscheduled"
        events = core_api.list_namespaced_event(
            team.namespace, field_selector="involvedObject.name=wants-bad"
        ).items
        assert any("cannot allocate all claims" in (e.message or "") for e in events), [
            e.message for e in events
        ]

        # Healthy again: the taint goes, and the waiting pod gets its GPU.
        report(node)
        assert node.health_verdict == "ok" and node.gpu_faults == []
        services.cluster_inventory_sync(cluster=cluster)
        assert rules(custom) == {}
        wait_for(lambda: pod_phase(core_api, team.namespace, "wants-bad") == "Running", timeout=60)
    finally:
        report(node)
        services.cluster_inventory_sync(cluster=cluster)
        for name in ("wants-bad", "wants-good"):
            delete_pod(core_api, team.namespace, name)


def test_a_gpu_that_fell_off_the_bus_evicts_its_pods_and_its_work_moves_to_healthy_gpus(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    custom: k8s.CustomObjectsApi,  # noqa: F811 - the fixture
) -> None:
    h100 = dra_class("H100-80GB")
    TeamQuota.objects.update_or_create(
        team=team, gpu_class=h100, defaults={"guaranteed_milli": 8000, "limit_milli": 8000}
    )
    workload = run(team, cluster, h100, 1000)
    (replica,) = workload.placement["replicas"]
    (gone,) = replica["gpu_uuids"]
    node = ClusterNode.objects.get(cluster=cluster, name=replica["node"])
    index = node.gpu_uuids.index(gone)
    # A pod outside gpupaas on another GPU of the node, which falls off the bus too: the
    # cluster's own eviction is seen on it.
    other = next(i for i in range(len(node.gpu_uuids)) if i != index)
    pinned_pod(custom, core_api, team.namespace, "bystander", node.gpu_uuids[other])
    wait_for(lambda: pod_phase(core_api, team.namespace, "bystander") == "Running", timeout=40)
    try:
        report(node, **{str(index): {"xid": 79}, str(other): {"xid": 79}})
        assert {f["effect"] for f in node.gpu_faults} == {"NoExecute"}
        assert all("fell off the bus (XID 79)" in f["reason"] for f in node.gpu_faults)

        # gpupaas moves its work off, with the reason in words.
        assert gpu_fault_pass() == (workload.pk,)
        workload.refresh_from_db()
        assert workload.state == wl.PREEMPTED
        assert workload.last_reason.startswith("GPU fault: ")
        assert "fell off the bus (XID 79)" in workload.last_reason
        assert "returns to the queue" in workload.last_reason

        # The cluster evicts what it runs there: the device taint eviction controller.
        services.cluster_inventory_sync(cluster=cluster)
        taints = [r["spec"]["taint"] for r in rules(custom).values()]
        assert taints and {t["effect"] for t in taints} == {"NoExecute"}
        wait_for(lambda: pod_phase(core_api, team.namespace, "bystander") is None, timeout=60)

        # Requeued, it starts again on healthy GPUs, never on the one that is gone.
        def placed_again() -> Workload | None:
            services.workload_reconcile(workload_id=workload.pk)
            services.status_sync_pass(cluster=cluster)
            scheduling_cycle_run()
            workload.refresh_from_db()
            return workload if workload.state in wl.ACTIVE_STATES else None

        again = wait_for(placed_again, timeout=60)
        uuids = {u for r in again.placement["replicas"] for u in r["gpu_uuids"]}
        assert uuids and not uuids & {gone, node.gpu_uuids[other]}
        workload_cancel(actor=workload.owner, workload=workload)
        services.workload_reconcile(workload_id=workload.pk)
    finally:
        report(node)
        services.cluster_inventory_sync(cluster=cluster)
        delete_pod(core_api, team.namespace, "bystander")
