"""API clients per registered cluster, built once per process and file version."""

from __future__ import annotations

import os
import threading

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.catalog.models import Cluster
from apps.orchestration.kube import Kube

_lock = threading.Lock()
_cache: dict[tuple[str, str, str, float], Kube] = {}


class ClusterConfigError(RuntimeError):
    """The cluster's connection settings cannot be used (missing file, bad context)."""


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
            kube = Kube(_api_client(cluster))
            _cache[key] = kube
        return kube


def _api_client(cluster: Cluster) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    try:
        if cluster.connection == Cluster.Connection.IN_CLUSTER:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=cluster.kubeconfig_path,
                context=cluster.kubeconfig_context or None,
                client_configuration=configuration,
            )
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise ClusterConfigError(f"Cluster {cluster.name}: {exc}") from exc
    # Fail fast when the API server is gone; with_backoff does the retrying.
    configuration.retries = 0
    return k8s.ApiClient(configuration)


def forget_clients() -> None:
    with _lock:
        _cache.clear()
