"""Node health changes decisions, on the simulated cluster: a cordoned node, a NotReady one,
one whose health check failed and one in maintenance get no new placements; the admin sees
why; a drained node's workload gets its class's notice and goes back to the queue, then
starts on a node that takes work."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, NodeMaintenance
from apps.catalog.selectors import node_blockers
from apps.catalog.services import node_maintenance_delete, node_maintenance_save
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice
from apps.orchestration import services
from apps.quotas.models import TeamQuota
from apps.scheduling import selectors
from apps.scheduling.services import node_drain_pass, scheduling_cycle_run
from apps.telemetry import core as telemetry
from apps.telemetry.services import node_health_store
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_cancel, workload_submit
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.orchestration.test_preemption_on_kubesim import pods_of, run_until
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
GRACE = 2
H100 = ("h100-0", "h100-1", "h100-2", "h100-3")


def set_ready(api: k8s.CoreV1Api, node: str, ready: bool) -> None:
    status = api.read_node_status(node).status
    for condition in status.conditions:
        if condition.type == "Ready":
            condition.status = "True" if ready else "False"
            condition.reason = "KubeletReady" if ready else "KubeletNotReady"
    api.patch_node_status(node, {"status": {"conditions": status.conditions}})


@pytest.fixture
def cordoned(core_api: k8s.CoreV1Api) -> Iterator[list[str]]:  # noqa: F811 - the fixture
    nodes: list[str] = []
    yield nodes
    for node in nodes:
        core_api.patch_node(node, {"spec": {"unschedulable": None}})


def failed_health(node: str) -> None:
    """The node's exporter reports 7 of its 8 GPUs: which one is gone cannot be told, so the
    node as a whole fails (a single faulty GPU fails only itself: test_gpu_faults_on_kubesim)."""
    gpus = [telemetry.GpuHealth(index=str(i), uuid=f"GPU-{node}-{i}") for i in range(7)]
    (report,) = node_health_store({node: telemetry.NodeHealth(node, "dcgm-exporter", gpus)})
    assert report.verdict == "failed"


def placed_nodes(workload: Workload) -> set[str]:
    return {r["node"] for r in workload.placement.get("replicas", [])}


def test_unhealthy_cordoned_and_maintained_nodes_get_no_work_and_a_drain_requeues(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    cordoned: list[str],
    settings: Any,
) -> None:
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = GRACE
    settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = 0
    h100 = GpuClassFactory()
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=8000, limit_milli=8000
    )
    admin = UserFactory(is_staff=True, is_superuser=True)
    owner = UserFactory()
    team.memberships.create(user=owner)

    # h100-0 cordoned, h100-1 NotReady (as the cluster says), h100-2 failed its health check,
    # h100-3 in a maintenance window.
    core_api.patch_node("h100-0", {"spec": {"unschedulable": True}})
    cordoned.append("h100-0")
    set_ready(core_api, "h100-1", False)
    try:
        services.cluster_inventory_sync(cluster=cluster)
    finally:
        set_ready(core_api, "h100-1", True)
    failed_health("h100-2")
    soon = timezone.now()
    window = node_maintenance_save(
        actor=admin,
        window=NodeMaintenance(
            node=ClusterNode.objects.get(cluster=cluster, name="h100-3"),
            starts_at=soon - timedelta(seconds=1),
            ends_at=soon + timedelta(hours=2),
            reason="firmware",
            drain=False,
        ),
    )
    nodes = ClusterNode.objects.filter(cluster=cluster, name__in=H100)
    blocked = node_blockers(nodes, now=soon)
    why = {n.name: " ".join(blocked[n.pk]) for n in nodes if n.pk in blocked}
    assert set(why) == set(H100)
    assert "Cordoned" in why["h100-0"]
    assert "NotReady" in why["h100-1"]
    assert "Health check failed" in why["h100-2"] and "the inventory expects 8" in why["h100-2"]
    assert "Maintenance until" in why["h100-3"] and "firmware" in why["h100-3"]
    offered = {n.name for n in selectors.node_specs(now=soon)}
    assert not offered & set(H100)

    # The admin sees why each node takes no work.
    browser = Client()
    browser.force_login(admin)
    page = browser.get("/admin/catalog/clusternode/").content.decode()
    for text in ("Cordoned", "NotReady", "Health check failed", "firmware"):
        assert text in page

    training = workload_submit(
        actor=owner,
        team=team,
        gpu_class=h100,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name="full-node",
            gpu_milli=1000,
            priority_class=wl.PRIORITY_TRAINING,
            command=["python", "train.py"],
            requeue_on_preemption=False,
            params={"pod_annotations": {"kubesim.io/run-duration": "10m"}},
        ),
    )
    run = scheduling_cycle_run()
    assert training.pk not in run.admitted
    training.refresh_from_db()
    assert training.state == wl.QUEUED

    # The window is cancelled: h100-3 takes work again, and gets it.
    node_maintenance_delete(actor=admin, window=window)
    run = scheduling_cycle_run()
    assert run.admitted == (training.pk,), training.last_reason
    training.refresh_from_db()
    assert placed_nodes(training) == {"h100-3"}
    services.workload_reconcile(workload_id=training.pk)
    run_until(training, cluster, wl.RUNNING)

    # Drain h100-3: the workload gets its class's notice and goes back to the queue (though
    # it chose not to requeue on preemption: a drain is not its fault).
    now = timezone.now()
    node_maintenance_save(
        actor=admin,
        window=NodeMaintenance(
            node=ClusterNode.objects.get(cluster=cluster, name="h100-3"),
            starts_at=now,
            ends_at=now + timedelta(hours=1),
            reason="replace GPU 3",
            drain=True,
        ),
    )
    assert node_drain_pass(now=now + timedelta(seconds=1)) == (training.pk,)
    assert node_drain_pass(now=now + timedelta(seconds=1)) == ()  # once
    training.refresh_from_db()
    assert training.state == wl.PREEMPTED
    assert training.last_reason.startswith(selectors.DRAIN_PREFIX)
    assert f"It has {GRACE} s to save a checkpoint" in training.last_reason
    notice = Notice.objects.get(user=owner, event=NoticeEvent.NODE_DRAIN)
    assert "h100-3" in notice.title and "replace GPU 3" in notice.body
    services.workload_reconcile(workload_id=training.pk)
    wait_for(lambda: not pods_of(core_api, training), timeout=30)

    later = now + timedelta(seconds=GRACE + 2)
    assert scheduling_cycle_run(now=later).requeued == (training.pk,)
    training.refresh_from_db()
    assert training.state == wl.QUEUED  # nowhere to go yet

    # h100-0 is uncordoned: the workload starts there.
    core_api.patch_node("h100-0", {"spec": {"unschedulable": None}})
    cordoned.remove("h100-0")
    services.cluster_inventory_sync(cluster=cluster)
    run = scheduling_cycle_run()
    assert run.admitted == (training.pk,), training.last_reason
    training.refresh_from_db()
    assert placed_nodes(training) == {"h100-0"}
    services.workload_reconcile(workload_id=training.pk)
    run_until(training, cluster, wl.RUNNING)

    # Leave the shared cluster's GPUs free for the next test.
    workload_cancel(actor=owner, workload=training)
    services.workload_reconcile(workload_id=training.pk)
    wait_for(lambda: not pods_of(core_api, training), timeout=30)
