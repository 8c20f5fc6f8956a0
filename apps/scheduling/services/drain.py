"""Nodes being drained for maintenance, and GPUs that fell off the bus: the work placed on
them is preempted and returns to the queue; the cycle places nothing new there meanwhile."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.catalog.models import Cluster, ClusterNode
from apps.catalog.selectors import nodes_being_drained as node_maintenance_draining
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.scheduling import handoff, selectors
from apps.scheduling.services.cycle import _lock_cycle
from apps.workloads import core as workload_core
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    preemption_grace_seconds,
)
from apps.workloads.services import (
    workload_transition,
)

log = logging.getLogger(__name__)


# --- nodes being drained ---------------------------------------------------------------------


def _on_node(workload: Workload, cluster: Cluster, node: str) -> bool:
    placement = selectors.placement_from_json(workload.placement)
    if placement is None:
        return False
    same_cluster = workload.cluster_id == cluster.pk or placement.cluster == cluster.name
    return same_cluster and any(r.node == node for r in placement.replicas)


def _move_off(
    workload: Workload, *, reason: str, preempted_at: datetime, title: str, key: str
) -> bool:
    """Preempt ``workload`` to move it off (back to the queue), telling its owner why; False
    when it changed state meanwhile."""
    if not workload_transition(
        workload=workload,
        to_state=workload_core.PREEMPTED,
        reason=reason[:500],
        extra={"preempted_at": preempted_at, "borrowed": False},
    ):
        return False
    notify(
        event=NoticeEvent.NODE_DRAIN,
        users=[workload.owner],
        title=title,
        body=reason,
        key=key,
        link=f"/workloads/{workload.pk}/",
        team=workload.team,
    )
    return True


def node_drain_pass(*, now: datetime | None = None) -> tuple[int, ...]:
    """Move the work off every node in an open maintenance window that drains: each workload
    placed there is preempted with its class's grace period (the pod's
    terminationGracePeriodSeconds) and a notice to its owner, then goes back to the queue,
    whatever it chose for preemption; the scheduler places nothing new there meanwhile.
    Returns the ids moved."""
    moment = now or timezone.now()
    graces = preemption_grace_seconds()
    moved: list[int] = []
    with transaction.atomic():
        _lock_cycle()  # never between a cycle's snapshot and its decisions
        windows = list(node_maintenance_draining(now=moment))
        if not windows:
            return ()
        active = Workload.objects.units().filter(state__in=workload_core.ACTIVE_STATES)
        for workload in active.select_related("team", "owner").order_by("id"):
            window = next(
                (w for w in windows if _on_node(workload, w.node.cluster, w.node.name)), None
            )
            if window is None:
                continue
            grace = graces.get(workload.priority_class, 0)
            reason = (
                f"{selectors.DRAIN_PREFIX} {window.node.name} is drained for maintenance "
                f"until {window.ends_at:%Y-%m-%d %H:%M} UTC ({window.reason}). It has {grace} s "
                "to save a checkpoint, then returns to the queue and starts on another node."
            )
            if _move_off(
                workload,
                reason=reason,
                preempted_at=moment,
                title=f"{workload.get_kind_display()} {workload.name} moves off {window.node.name}",
                key=f"node-drain-{window.pk}-{workload.pk}",
            ):
                moved.append(workload.pk)
        if moved:
            decisions = handoff.Decisions(admitted_ids=(), preempted_ids=tuple(moved))
            transaction.on_commit(lambda: handoff.decisions_hand_off(decisions))
            log.info("node drain: %d workloads moved off nodes in maintenance", len(moved))
    return tuple(moved)


# --- GPUs that fell off the bus ------------------------------------------------------------

NO_EXECUTE = "NoExecute"


def _gone_gpus() -> dict[tuple[str, str], dict[str, str]]:
    """(cluster name, GPU UUID) -> the fault of each GPU whose work must move off."""
    gone: dict[tuple[str, str], dict[str, str]] = {}
    rows = ClusterNode.objects.exclude(gpu_faults=[]).values_list(
        "cluster__name", "name", "gpu_faults"
    )
    for cluster, node, faults in rows:
        for fault in faults or ():
            if isinstance(fault, dict) and fault.get("effect") == NO_EXECUTE and fault.get("uuid"):
                gone[(cluster, str(fault["uuid"]))] = {**fault, "node": node}
    return gone


def gpu_fault_pass(*, now: datetime | None = None) -> tuple[int, ...]:
    """Move the work off every GPU that fell off the bus (a NoExecute fault of its node's
    health check): each workload with a replica on such a GPU is preempted at once, told which
    GPU and why, and goes back to the queue to start on healthy GPUs. Work on a GPU with a
    NoSchedule fault keeps running; only new work stays off it. Returns the ids moved."""
    moment = now or timezone.now()
    graces = preemption_grace_seconds()
    moved: list[int] = []
    with transaction.atomic():
        _lock_cycle()
        gone = _gone_gpus()
        if not gone:
            return ()
        active = Workload.objects.units().filter(state__in=workload_core.ACTIVE_STATES)
        for workload in active.select_related("team", "owner", "cluster").order_by("id"):
            placement = workload.placement or {}
            cluster = placement.get("cluster") or (
                workload.cluster.name if workload.cluster else ""
            )
            fault = next(
                (
                    gone[(cluster, uuid)]
                    for replica in placement.get("replicas") or ()
                    for uuid in replica.get("gpu_uuids") or ()
                    if (cluster, uuid) in gone
                ),
                None,
            )
            if fault is None:
                continue
            reason = (
                f"GPU fault: {fault.get('reason') or fault['uuid']} on {fault['node']}. Nothing "
                "runs on that GPU any more: this workload returns to the queue and starts on "
                "healthy GPUs (from its last checkpoint, if it saves them)."
            )
            # Its grace period is spent at once: nothing runs on that GPU to save from, so the
            # next cycle puts it back in the queue.
            spent = timedelta(seconds=graces.get(workload.priority_class, 0))
            if _move_off(
                workload,
                reason=reason,
                preempted_at=moment - spent,
                title=f"{workload.get_kind_display()} {workload.name} moves off a failed GPU",
                key=f"gpu-fault-{fault['uuid']}-{workload.pk}",
            ):
                moved.append(workload.pk)
        if moved:
            decisions = handoff.Decisions(admitted_ids=(), preempted_ids=tuple(moved))
            transaction.on_commit(lambda: handoff.decisions_hand_off(decisions))
            log.info("gpu faults: %d workloads moved off GPUs that fell off the bus", len(moved))
    return tuple(moved)
