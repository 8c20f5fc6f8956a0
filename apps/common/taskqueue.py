"""The platform's Celery tasks, named once and typed by their arguments.

Code that queues work holds a :class:`TaskRef` from this registry instead of a string, so the
type checker sees every caller's arguments and an import graph shows who queues what, while the
domain apps keep importing downwards only: the module that *defines* a task binds it to its ref
(``@shared_task(name=taskqueue.WORKLOAD_RECONCILE.name)``) and the module that *queues* it only
needs this registry. ``tests/platform/test_celery.py`` checks that every ref names a registered
task whose parameters are the ref's, and that no module queues a task by a bare string.

Queueing never fails the caller: if the broker is down the failure is logged and the periodic
passes (beat) catch up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Generic, ParamSpec

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

P = ParamSpec("P")


@dataclass(frozen=True)
class TaskRef(Generic[P]):
    """One Celery task: its registered name and the names of its parameters."""

    name: str
    params: tuple[str, ...] = ()

    def send(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue the task now; a broker failure is logged, never raised."""
        try:
            current_app.send_task(self.name, args=list(args), kwargs=kwargs, retry=False)
        except Exception as exc:  # any broker failure must not break the caller
            log.warning("could not queue %s%s: %s", self.name, args, exc)

    def on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue the task when the current transaction commits (at once outside one)."""
        transaction.on_commit(lambda: self.send(*args, **kwargs))


# --- the registry: every task of the platform ---------------------------------------------------

HEARTBEAT: TaskRef[[]] = TaskRef("platform.heartbeat")

SCHEDULING_CYCLE: TaskRef[[]] = TaskRef("scheduling.run_cycle")
NODE_DRAIN_PASS: TaskRef[[]] = TaskRef("scheduling.node_drain_pass")

TEAM_NAMESPACE_ENSURE: TaskRef[[int]] = TaskRef("orchestration.team_namespace_ensure", ("team_id",))
CLUSTER_SETUP: TaskRef[[int]] = TaskRef("orchestration.cluster_setup", ("cluster_id",))
WORKLOAD_RECONCILE: TaskRef[[int]] = TaskRef("orchestration.workload_reconcile", ("workload_id",))
CREDENTIAL_REMOVE: TaskRef[[str, str]] = TaskRef(
    "orchestration.credential_remove", ("namespace", "k8s_name")
)
RECONCILE_ALL: TaskRef[[]] = TaskRef("orchestration.reconcile_all")
STATUS_SYNC_ALL: TaskRef[[]] = TaskRef("orchestration.status_sync_all")
INVENTORY_SYNC_ALL: TaskRef[[]] = TaskRef("orchestration.inventory_sync_all")
TRIAL_METRICS_ALL: TaskRef[[]] = TaskRef("orchestration.trial_metrics_all")
DRIFT_REPAIR_ALL: TaskRef[[]] = TaskRef("orchestration.drift_repair_all")
LOG_ARCHIVE_PURGE: TaskRef[[]] = TaskRef("orchestration.log_archive_purge")

TELEMETRY_INGEST: TaskRef[[]] = TaskRef("telemetry.ingest")
TELEMETRY_NODE_HEALTH: TaskRef[[]] = TaskRef("telemetry.node_health")
BUDGET_SPEND_REFRESH: TaskRef[[]] = TaskRef("telemetry.budget_spend_refresh")

QUOTA_GRANT_BOUNDARIES: TaskRef[[]] = TaskRef("quotas.grant_boundaries")
RESERVATION_BOUNDARIES: TaskRef[[]] = TaskRef("reservations.boundaries")
NOTICE_DELIVER: TaskRef[[int]] = TaskRef("notifications.deliver", ("delivery_id",))
NOTICE_SWEEP: TaskRef[[]] = TaskRef("notifications.sweep")
NOTICE_DIGEST: TaskRef[[]] = TaskRef("notifications.digest")

SERVING_AUTOSCALE: TaskRef[[]] = TaskRef("serving.autoscale")
SERVING_SAMPLES_PURGE: TaskRef[[]] = TaskRef("serving.samples_purge")

REGISTRY: tuple[TaskRef, ...] = (
    HEARTBEAT,
    SCHEDULING_CYCLE,
    NODE_DRAIN_PASS,
    TEAM_NAMESPACE_ENSURE,
    CLUSTER_SETUP,
    WORKLOAD_RECONCILE,
    CREDENTIAL_REMOVE,
    RECONCILE_ALL,
    STATUS_SYNC_ALL,
    INVENTORY_SYNC_ALL,
    TRIAL_METRICS_ALL,
    DRIFT_REPAIR_ALL,
    LOG_ARCHIVE_PURGE,
    TELEMETRY_INGEST,
    TELEMETRY_NODE_HEALTH,
    BUDGET_SPEND_REFRESH,
    QUOTA_GRANT_BOUNDARIES,
    RESERVATION_BOUNDARIES,
    NOTICE_DELIVER,
    NOTICE_SWEEP,
    NOTICE_DIGEST,
    SERVING_AUTOSCALE,
    SERVING_SAMPLES_PURGE,
)
