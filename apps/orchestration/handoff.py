"""Orchestration's side of the scheduler's hand-off: queue a reconcile per decided workload."""

from __future__ import annotations

from apps.common import taskqueue
from apps.scheduling.handoff import Decisions


def on_scheduling_decisions(decisions: Decisions) -> None:
    """Admitted workloads get their objects; preempted ones lose them (after their grace)."""
    for workload_id in (*decisions.admitted_ids, *decisions.preempted_ids):
        taskqueue.WORKLOAD_RECONCILE.send(workload_id)
