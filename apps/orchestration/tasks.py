"""Thin Celery tasks: load ids, call one service, own retries and failure reasons."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.app.task import Task

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.common import taskqueue
from apps.orchestration import credentials, services
from apps.orchestration.errors import ClusterError, ClusterUnreachable
from apps.orchestration.selectors import enabled_clusters

log = logging.getLogger(__name__)
# Unreachable includes connection settings that cannot be used (ClusterConfigError).
RETRYABLE = (ClusterUnreachable,)


@shared_task(
    name=taskqueue.TEAM_NAMESPACE_ENSURE.name,
    autoretry_for=RETRYABLE,
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=None,
    ignore_result=True,
)
def team_namespace_ensure(team_id: int) -> None:
    team = Team.objects.filter(pk=team_id).first()
    if team is not None:
        services.team_namespace_ensure(team=team)


class WorkloadTask(Task):
    """Retries transient cluster errors; a workload never fails because an API call did."""

    autoretry_for = RETRYABLE
    retry_backoff = True
    retry_backoff_max = 120
    max_retries = None

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        log.error("task %s for %s failed: %s", self.name, args, exc)


@shared_task(base=WorkloadTask, name=taskqueue.WORKLOAD_RECONCILE.name, ignore_result=True)
def workload_reconcile(workload_id: int) -> None:
    services.workload_reconcile(workload_id=workload_id)


# Clusters whose last pass failed, with what they failed with: a cluster that is starting (its
# kubeconfig not written yet) or down is said once, then quiet until its pass works again.
_failing: dict[str, str] = {}


def _each_cluster(fn: Any) -> None:
    for cluster in enabled_clusters():
        try:
            fn(cluster=cluster)
        except ClusterError as exc:
            # The next beat tick retries; workloads already say "cluster unreachable, retrying".
            # One cluster's failure never keeps the others from their pass.
            if _failing.get(cluster.name) != type(exc).__name__:
                log.warning("cluster %s: %s (said once; retried every pass)", cluster.name, exc)
            _failing[cluster.name] = type(exc).__name__
        else:
            if _failing.pop(cluster.name, None) is not None:
                log.warning("cluster %s: reachable again", cluster.name)


@shared_task(name=taskqueue.RECONCILE_ALL.name, ignore_result=True)
def reconcile_all() -> None:
    _each_cluster(services.reconcile_pass)


@shared_task(name=taskqueue.STATUS_SYNC_ALL.name, ignore_result=True)
def status_sync_all() -> None:
    _each_cluster(services.status_sync_pass)


@shared_task(name=taskqueue.INVENTORY_SYNC_ALL.name, ignore_result=True)
def inventory_sync_all() -> None:
    _each_cluster(services.cluster_inventory_sync)


@shared_task(name=taskqueue.TRIAL_METRICS_ALL.name, ignore_result=True)
def trial_metrics_all() -> None:
    _each_cluster(services.trial_metrics_pass)


@shared_task(name=taskqueue.DRIFT_REPAIR_ALL.name, ignore_result=True)
def drift_repair_all() -> None:
    _each_cluster(services.drift_repair_pass)


@shared_task(name=taskqueue.LOG_ARCHIVE_PURGE.name, ignore_result=True)
def log_archive_purge() -> None:
    services.log_archive_purge()


@shared_task(
    name=taskqueue.CLUSTER_SETUP.name,
    autoretry_for=RETRYABLE,
    retry_backoff=True,
    max_retries=None,
    ignore_result=True,
)
def cluster_setup(cluster_id: int) -> None:
    """A new or re-enabled cluster: every team's namespace, then its inventory."""
    cluster = Cluster.objects.get(pk=cluster_id)
    for team in Team.objects.all():
        services.team_namespace_ensure(team=team, clusters=[cluster])
    services.cluster_inventory_sync(cluster=cluster)


@shared_task(
    name=taskqueue.CREDENTIAL_REMOVE.name,
    autoretry_for=RETRYABLE,
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=None,
    ignore_result=True,
)
def credential_remove(namespace: str, k8s_name: str) -> None:
    credentials.credential_remove(namespace=namespace, k8s_name=k8s_name)
