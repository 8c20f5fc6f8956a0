"""Nodes that died under running gangs: a pure decision over the Node and Pod objects as the
API server gives them (plain dicts), no API calls.

When a node's kubelet stops reporting, the controller-manager marks the node NotReady (its
Ready condition Unknown) after its node-monitor grace period, but the pods bound to it stay
"Running" until the taint manager evicts them (five minutes later by default), and a pod
deleted there never goes: no kubelet confirms it. A gang cannot wait that long: its replicas on
the healthy nodes stall on a rendezvous that cannot complete. So a gang with a replica on a
node that has not been Ready for longer than a grace (NODE_LOSS_GRACE_SECONDS) is lost whole:
the service requeues it, deletes its objects and lets the scheduler place it again, where the
inventory no longer offers the dead node
(:func:`apps.orchestration.services.lost_gangs_restart`, run by each status sync pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
ENDED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class LostNode:
    name: str
    words: str  # why, for people: "node real-1 has not been Ready for 75 s (…)"


def _as_dt(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _ready_condition(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def lost_nodes(
    nodes: Iterable[Mapping[str, Any]], *, now: datetime, grace_seconds: int
) -> dict[str, LostNode]:
    """The nodes whose kubelet has not reported Ready for longer than ``grace_seconds``, by
    name. A node Ready, or NotReady for less than the grace (a kubelet restarting), is not lost;
    a node without a Ready condition (never reported) is not judged here."""
    lost: dict[str, LostNode] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        ready = _ready_condition(node)
        if not name or ready is None or ready.get("status") == "True":
            continue
        since = _as_dt(ready.get("lastTransitionTime"))
        if since is None:
            continue
        seconds = int((now - since).total_seconds())
        if seconds < grace_seconds:
            continue
        taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
        state = "unreachable" if UNREACHABLE_TAINT in taints else "not Ready"
        detail = str(ready.get("message") or ready.get("reason") or "").strip()
        words = f"node {name} has been {state} for {seconds} s"
        lost[name] = LostNode(name, f"{words} ({detail})" if detail else words)
    return lost


def _replica(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    index = (meta.get("labels") or {}).get("batch.kubernetes.io/job-completion-index")
    name = meta.get("name") or "?"
    return f"replica {index} (pod {name})" if index is not None else f"pod {name}"


def gang_loss(
    pods: Sequence[Mapping[str, Any]],
    lost: Mapping[str, LostNode],
    *,
    replicas: int,
    requeue: bool = True,
) -> str | None:
    """Why a running gang must restart whole because a node under it died, or None: the first
    replica (by index) whose pod has not ended, is not being deleted and is bound to a lost
    node. A pod being deleted is either the status observation's to judge (a replica of this
    run, lost) or left over from an earlier run: a pod deleted on a dead node stays, since no
    kubelet confirms its end, and must not restart the gang again. The reason reads as the
    status observation's for a lost replica, so the user sees one story (``requeue``: whether
    the owner wants a preempted run back in the queue)."""
    if not lost:
        return None

    def index(pod: Mapping[str, Any]) -> str:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        return str(labels.get("batch.kubernetes.io/job-completion-index", ""))

    for pod in sorted(pods, key=index):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in lost:
            continue
        if (pod.get("status") or {}).get("phase") in ENDED_PHASES:
            continue
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        then = (
            f"back in the queue, then admitted again with all {replicas} replicas together, on "
            "nodes that are Ready."
            if requeue
            else "you chose not to requeue it; resubmit when you are ready."
        )
        return f"{_replica(pod)} was lost: {lost[node].words}. The gang restarts whole: {then}"
    return None
