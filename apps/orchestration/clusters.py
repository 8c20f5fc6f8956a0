"""API clients per registered cluster, built once per process and file version."""

from __future__ import annotations

import os
import threading

from apps.catalog.models import Cluster
from apps.orchestration.errors import ClusterConfigError
from apps.orchestration.kube import Kube, api_client_from_config

_lock = threading.Lock()
_cache: dict[tuple[str, str, str, float], Kube] = {}


def kube_for(cluster: Cluster) -> Kube:
    """The adapter for a cluster. A changed kubeconfig file (new mtime) gets a new client."""
    if cluster.connection == Cluster.Connection.IN_CLUSTER:
        key = ("in-cluster", "", "", 0.0)
    else:
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
