"""The registered clusters: which are enabled, which one a workload lives on, and their API
clients, built once per process and file version."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from apps.catalog.models import Cluster
from apps.orchestration.errors import ClusterConfigError, ClusterStarting
from apps.orchestration.kube import Kube, api_client_from_config
from apps.orchestration.starting import starting_step

if TYPE_CHECKING:
    from apps.workloads.models import Workload

_lock = threading.Lock()
_cache: dict[tuple[str, str, str, float], Kube] = {}


def enabled_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(enabled=True).order_by("name")


def cluster_of(workload: Workload) -> Cluster | None:
    """The workload's cluster: where it was admitted, else the only enabled cluster."""
    if workload.cluster_id is not None:
        return workload.cluster
    clusters = list(enabled_clusters()[:2])
    return clusters[0] if len(clusters) == 1 else None


def kube_for(cluster: Cluster) -> Kube:
    """The adapter for a cluster. A changed kubeconfig file (new mtime) gets a new client. A
    cluster that its tool says is still starting raises :class:`ClusterStarting` at once."""
    if cluster.connection == Cluster.Connection.IN_CLUSTER:
        key = ("in-cluster", "", "", 0.0)
    else:
        step = starting_step(cluster.kubeconfig_path)
        if step is not None:
            raise ClusterStarting(cluster.name, step)
        try:
            mtime = os.stat(cluster.kubeconfig_path).st_mtime
        except OSError as exc:
            raise ClusterConfigError(
                f"Cluster {cluster.name}: kubeconfig {cluster.kubeconfig_path!r} "
                f"cannot be read ({exc})."
            ) from exc
        key = ("file", cluster.kubeconfig_path, cluster.kubeconfig_context, mtime)
    with _lock:
        kube = _cache.get(key)
        if kube is None:
            in_cluster = cluster.connection == Cluster.Connection.IN_CLUSTER
            try:
                api_client = api_client_from_config(
                    kubeconfig=None if in_cluster else cluster.kubeconfig_path,
                    context=cluster.kubeconfig_context or None,
                )
            except ClusterConfigError as exc:
                raise ClusterConfigError(f"Cluster {cluster.name}: {exc}") from exc
            kube = Kube(api_client)
            _cache[key] = kube
        return kube


def forget_clients() -> None:
    with _lock:
        _cache.clear()
