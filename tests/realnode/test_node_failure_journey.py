"""A real node dies under a running gang: the portal restarts the gang whole on the nodes that
are left, and the training resumes from its checkpoint.

The node's kubelet is killed (SIGKILL); its containers go on, as they would on a node cut off
from the control plane, until the portal deletes the gang. The controller-manager marks the
node NotReady after its node-monitor grace period (40 s); the taint manager would evict its pods
only minutes later, and a pod deleted there never goes (no kubelet confirms it), so the portal
does not wait for that: its status pass sees a replica on a node NotReady beyond
ORCHESTRATION_NODE_LOSS_GRACE_SECONDS and preempts the gang whole (apps/orchestration/
node_loss.py decides, services.lost_gangs_restart applies), the inventory no longer offers
the node, and the gang is admitted again on two Ready nodes.

A dead kubelet cannot be brought back: the cluster of this pytest process has one real node
less afterwards (its Node object is deleted at the end, so no scheduler considers it). This
module is its own xdist group; in a run without xdist it comes after the modules that need all
three nodes (tests/realnode/test_cluster.py uses the first two).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from apps.accounts.models import Team, User
from apps.catalog.models import Cluster, ClusterNode, GpuClass, Image
from apps.workloads.models import Workload
from tests.realnode.conftest import Api, Drive, pods_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode, pytest.mark.xdist_group("node-death")]

STEPS = 2000


def kubelet_pid(node: dict[str, Any]) -> int:
    return int(Path(node["kubelet_pid_file"]).read_text().strip())


def running_pods(kube_api_client: k8s.ApiClient, workload: Workload) -> list[Any]:
    return [
        p
        for p in pods_of(kube_api_client, workload)
        if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
    ]


def node_ready(core: k8s.CoreV1Api, name: str) -> str:
    node = core.read_node(name)
    return next(c.status for c in node.status.conditions if c.type == "Ready")


@pytest.fixture
def restart_quickly(settings: Any) -> None:
    """A short grace for the pods (and so for the requeue) and for a node NotReady."""
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = 10
    settings.ORCHESTRATION_NODE_LOSS_GRACE_SECONDS = 10


def test_a_gang_whose_node_dies_restarts_whole_on_ready_nodes_and_resumes(
    api: Api,
    drive: Drive,
    real_cluster: Cluster,
    kube_api_client: k8s.ApiClient,
    real_nodes: list[dict[str, Any]],
    team: Team,
    member: User,
    l4: GpuClass,
    catalog: dict[str, Image],
    restart_quickly: None,
) -> None:
    core = k8s.CoreV1Api(kube_api_client)

    body = {
        "kind": "training",
        "name": "two-nodes",
        "team": team.slug,
        "gpu_class": l4.name,
        "image": catalog["training"].name,
        "gpu_milli": 1000,
        "replicas": 2,
        "command": ["gpupaas-train", "--steps", str(STEPS), "--step-seconds", "0.1"],
    }
    created = api(member).post("/api/v1/workloads/", body, "json")
    assert created.status_code == 201, created.json()
    gang = Workload.objects.get(pk=created.json()["id"])

    def both_running() -> list[Any]:
        gang.refresh_from_db()
        pods = running_pods(kube_api_client, gang)
        return pods if gang.state == "running" and len(pods) == 2 else []

    first = drive(both_running, timeout=240, every=2)
    first_nodes = {p.spec.node_name for p in first}
    assert len(first_nodes) == 2 and first_nodes <= {n["name"] for n in real_nodes}
    rank0 = next(
        p for p in first if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0"
    )

    def checkpointed() -> bool:
        log = core.read_namespaced_pod_log(rank0.metadata.name, team.namespace)
        return '"step": 30,' in log

    wait_for(checkpointed, timeout=120, every=1)

    # The later of the gang's two nodes dies (tests that take the first nodes keep them).
    order = [n["name"] for n in real_nodes]
    victim = max(first_nodes, key=order.index)
    info = next(n for n in real_nodes if n["name"] == victim)
    os.kill(kubelet_pid(info), signal.SIGKILL)
    try:
        wait_for(lambda: node_ready(core, victim) != "True", timeout=120, every=2)

        def restarted() -> list[Any]:
            gang.refresh_from_db()
            pods = running_pods(kube_api_client, gang)
            new = [p for p in pods if p.metadata.uid not in {q.metadata.uid for q in first}]
            return new if gang.state == "running" and len(new) == 2 else []

        second = drive(restarted, timeout=300, every=2)
        second_nodes = {p.spec.node_name for p in second}
        assert victim not in second_nodes and len(second_nodes) == 2, second_nodes
        for name in second_nodes:
            assert node_ready(core, name) == "True"
        assert not ClusterNode.objects.get(cluster=real_cluster, name=victim).ready

        events = api(member).get(f"/api/v1/workloads/{gang.pk}/events/").json()["events"]
        reasons = [e["reason"] for e in events if e["to_state"] == "preempted"]
        assert len(reasons) == 1, events
        assert f"was lost: node {victim} has been" in reasons[0], reasons
        assert "The gang restarts whole" in reasons[0], reasons

        for p in second:
            env = {e.name: e.value for e in p.spec.containers[0].env}
            assert env["GPUPAAS_RESTART_COUNT"] == "1", env
        new_rank0 = next(
            p
            for p in second
            if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0"
        )

        def resumed() -> str | None:
            log = core.read_namespaced_pod_log(new_rank0.metadata.name, team.namespace)
            line = next((x for x in log.splitlines() if x.startswith("resuming from")), None)
            return line

        line = wait_for(resumed, timeout=120, every=1)
        start = int(line.split("at step ")[1].split(" ")[0])
        assert start >= 30 and line.endswith("(restart count 1)"), line

        def succeeded() -> bool:
            gang.refresh_from_db()
            return gang.state in ("succeeded", "failed")

        drive(succeeded, timeout=600, every=2)
        assert gang.state == "succeeded", gang.last_reason
        logs = api(member).get(f"/api/v1/workloads/{gang.pk}/logs/", {"tail": 5})
        assert logs.status_code == 200
        assert f"training done at step {STEPS}" in logs.getvalue().decode()
    finally:
        # The node cannot come back: its Node goes, so no scheduler considers it any more and
        # the pods left on it are collected.
        try:
            core.delete_node(victim)
        except ApiException as exc:
            if exc.status != 404:
                raise
