"""Gangs with a replica on a node lost for good are restarted whole, on Ready nodes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.catalog.models import Cluster
from apps.catalog.resources import GPU_NODES_SELECTOR
from apps.common import taskqueue
from apps.orchestration import cluster_reads, clusters, node_loss
from apps.orchestration.errors import (
    ClusterError,
)
from apps.orchestration.kube import (
    Kube,
)
from apps.orchestration.selectors import (
    placed_on,
)
from apps.orchestration.services.archiving import archive_runs
from apps.orchestration.services.inventory import cluster_inventory_store
from apps.orchestration.services.objects import delete_objects
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_transition,
)

log = logging.getLogger(__name__)


@dataclass
class NodeLossResult:
    lost_nodes: list[str] = field(default_factory=list)
    restarted: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _restart_if_lost(
    kube: Kube,
    workload: Workload,
    pods: list[dict[str, Any]],
    lost: Mapping[str, node_loss.LostNode],
    *,
    now: datetime,
    result: NodeLossResult,
) -> None:
    """Preempt the gang if a replica is on a lost node, keep the logs the cluster can still
    give, and delete its objects at once."""
    reason = node_loss.gang_loss(
        pods, lost, replicas=workload.replicas, requeue=workload.requeue_on_preemption
    )
    if reason is None:
        return
    # Claimed by the conditional transition: a status pass or a user acting on it at the
    # same time moves it from the state read here, and then this does nothing.
    if not workload_transition(
        workload=workload,
        to_state=wl.PREEMPTED,
        reason=reason,
        expected_from=workload.state,
        extra={"preempted_at": now},  # the requeue grace counts from here
    ):
        return
    result.restarted.append(workload.pk)
    try:
        archive_runs(kube, workload, cluster_reads.pod_runs(pods), once=True)
        delete_objects(kube, workload)
    except ClusterError as exc:
        # The reconcile pass deletes a preempted workload's objects too.
        result.problems.append(f"workload {workload.pk}: {exc}")
        log.warning("workload %s: objects of the lost gang not deleted: %s", workload.pk, exc)
        return
    Workload.objects.filter(pk=workload.pk).update(k8s_objects=[])


def lost_gangs_restart(
    *, cluster: Cluster, kube: Kube | None = None, now: datetime | None = None
) -> NodeLossResult:
    """Restart whole, on Ready nodes, every gang of ``cluster`` with a replica on a node that
    has not been Ready for ORCHESTRATION_NODE_LOSS_GRACE_SECONDS (:mod:`node_loss` decides).

    Each is preempted (back in the queue after the grace period its pods are given, unless its
    owner chose otherwise; its replicas on healthy nodes save a checkpoint meanwhile), the logs
    the cluster can still give are archived (the dead node's are recorded as unavailable, once,
    so they do not hold up the delete), and its objects are deleted at once: the pod left on the
    dead node stays, terminating, since no kubelet confirms its end; the next run's pods are
    another Job's. The inventory records the nodes NotReady now, so the next cycles place the
    gang on Ready nodes only. One list call (the GPU nodes) when no node is lost.
    """
    now = now or timezone.now()
    result = NodeLossResult()
    kube = kube or clusters.kube_for(cluster)
    nodes = kube.list_objects("v1", "Node", label_selector=GPU_NODES_SELECTOR)
    lost = node_loss.lost_nodes(
        nodes, now=now, grace_seconds=settings.ORCHESTRATION_NODE_LOSS_GRACE_SECONDS
    )
    if not lost:
        return result
    result.lost_nodes = sorted(lost)
    cluster_inventory_store(cluster=cluster, nodes=nodes)
    gangs = Workload.objects.units().filter(
        kind=wl.KIND_TRAINING, replicas__gt=1, state__in=(wl.STARTING, wl.RUNNING)
    )
    for workload in placed_on(gangs, cluster).select_related("team"):
        try:
            pods = cluster_reads.workload_pods(workload, kube=kube)
        except ClusterError as exc:
            result.problems.append(f"workload {workload.pk}: {exc}")
            continue
        _restart_if_lost(kube, workload, pods, lost, now=now, result=result)
    if result.restarted:
        taskqueue.SCHEDULING_CYCLE.send()
    return result
