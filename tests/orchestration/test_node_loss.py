"""The node-loss decision on plain data: which nodes are lost (NotReady beyond the grace), and
which gangs must restart whole because a replica of theirs is on one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apps.orchestration.node_loss import LostNode, gang_loss, lost_nodes

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def node(name: str, ready: str, since: datetime | None, *, unreachable: bool = False) -> Any:
    condition: dict[str, Any] = {
        "type": "Ready",
        "status": ready,
        "reason": "NodeStatusUnknown" if ready == "Unknown" else "KubeletReady",
        "message": "Kubelet stopped posting node status." if ready == "Unknown" else "",
    }
    if since is not None:
        condition["lastTransitionTime"] = since.isoformat().replace("+00:00", "Z")
    spec: dict[str, Any] = {}
    if unreachable:
        spec["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    return {"metadata": {"name": name}, "spec": spec, "status": {"conditions": [condition]}}


def pod(
    index: int, node_name: str | None, phase: str = "Running", *, deleting: bool = False
) -> Any:
    meta: dict[str, Any] = {
        "name": f"wl-7-{index}-abcde",
        "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T11:59:00Z"
    spec = {"nodeName": node_name} if node_name else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_a_node_not_ready_beyond_the_grace_is_lost_with_why() -> None:
    nodes = [
        node("real-0", "True", NOW - timedelta(hours=1)),
        node("real-1", "Unknown", NOW - timedelta(seconds=75), unreachable=True),
        node("real-2", "False", NOW - timedelta(seconds=31)),
    ]
    lost = lost_nodes(nodes, now=NOW, grace_seconds=30)
    assert lost == {
        "real-1": LostNode(
            "real-1",
            "node real-1 has been unreachable for 75 s (Kubelet stopped posting node status.)",
        ),
        "real-2": LostNode("real-2", "node real-2 has been not Ready for 31 s (KubeletReady)"),
    }


def test_a_node_not_ready_within_the_grace_or_never_reported_is_not_lost() -> None:
    nodes = [
        node("restarting", "Unknown", NOW - timedelta(seconds=29)),
        node("new", "Unknown", None),
        {"metadata": {"name": "bare"}, "status": {}},
        node("healthy", "True", NOW - timedelta(days=3)),
    ]
    assert lost_nodes(nodes, now=NOW, grace_seconds=30) == {}


def test_a_gang_with_a_live_replica_on_a_lost_node_restarts_whole() -> None:
    lost = {"real-1": LostNode("real-1", "node real-1 has been unreachable for 75 s")}
    pods = [pod(1, "real-1"), pod(0, "real-0")]
    assert gang_loss(pods, lost, replicas=2) == (
        "replica 1 (pod wl-7-1-abcde) was lost: node real-1 has been unreachable for 75 s. "
        "The gang restarts whole: back in the queue, then admitted again with all 2 replicas "
        "together, on nodes that are Ready."
    )


def test_a_gang_its_owner_does_not_want_requeued_is_told_so() -> None:
    lost = {"real-1": LostNode("real-1", "node real-1 has been unreachable for 75 s")}
    reason = gang_loss([pod(0, "real-1")], lost, replicas=2, requeue=False)
    assert reason == (
        "replica 0 (pod wl-7-0-abcde) was lost: node real-1 has been unreachable for 75 s. "
        "The gang restarts whole: you chose not to requeue it; resubmit when you are ready."
    )


def test_a_gang_on_ready_nodes_or_only_leftovers_on_the_lost_node_stays() -> None:
    lost = {"real-1": LostNode("real-1", "gone")}
    assert gang_loss([pod(0, "real-0"), pod(1, "real-2")], lost, replicas=2) is None
    # The pod left on the dead node by the run before (deleted, never confirmed): the new run
    # on Ready nodes is not restarted again because of it.
    leftovers = [pod(0, "real-1", deleting=True), pod(0, "real-0"), pod(1, "real-2")]
    assert gang_loss(leftovers, lost, replicas=2) is None
    # A replica that finished there before its node died, or a pod not bound yet.
    assert (
        gang_loss([pod(0, "real-1", "Succeeded"), pod(1, None, "Pending")], lost, replicas=2)
        is None
    )
    assert gang_loss([pod(0, "real-1")], {}, replicas=2) is None
