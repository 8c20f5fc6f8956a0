"""Team namespaces on every cluster, and the drift repair that restores what gpupaas set up
there when it was changed or deleted by hand."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import clusters as cluster_clients
from apps.orchestration import manifests as m
from apps.orchestration.errors import (
    ClusterRefused,
)
from apps.orchestration.kube import (
    IMMUTABLE_KINDS,
    OWNED_LIMIT_KINDS,
    Applied,
    ForeignObjectError,
    has_stale_limits,
    is_subset,
)
from apps.orchestration.selectors import (
    enabled_clusters,
    team_spec,
)

log = logging.getLogger(__name__)


def team_namespace_ensure(*, team: Team, clusters: Iterable[Cluster] | None = None) -> list[str]:
    """Namespace, quota, limits, network policies, service account and priority classes for a
    team on every enabled cluster. Returns the clusters it was applied to."""
    done = []
    manifests = [*m.priority_class_manifests(), *m.team_manifests(team_spec(team))]
    for cluster in clusters if clusters is not None else enabled_clusters():
        kube = cluster_clients.kube_for(cluster)
        for manifest in manifests:
            applied = kube.apply(manifest)
            if applied.kind == "RoleBinding" and applied.created:
                # A least-privileged portal may write in the namespace once the API server's
                # authorizer has seen the new binding (usually within a second).
                kube.wait_until_allowed("create", "serviceaccounts", namespace=applied.namespace)
        done.append(cluster.name)
    return done


@dataclass
class DriftResult:
    checked: int = 0
    repaired: list[Applied] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # objects left as they are, and why


def _without_empty(value: Any) -> Any:
    """``value`` without the false and empty fields the API server leaves out when it stores
    an object (``globalDefault: false``, ``[]``), which are no drift."""
    if isinstance(value, Mapping):
        return {
            k: _without_empty(v)
            for k, v in value.items()
            if not (v is False or v is None or v == "" or v == [] or v == {})
        }
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def _drifted(desired: m.Manifest, current: Mapping[str, Any] | None) -> bool:
    if current is None:
        return True
    kind = desired["kind"]
    if kind in IMMUTABLE_KINDS:
        return False
    stale = kind in OWNED_LIMIT_KINDS and has_stale_limits(desired, current)
    return stale or not is_subset(_without_empty(desired), current)


def drift_repair_pass(*, cluster: Cluster) -> DriftResult:
    """Restore what gpupaas set up for the teams on one cluster when it was changed or deleted
    by hand: namespaces, service accounts, ResourceQuotas, LimitRanges, NetworkPolicies and the
    PriorityClasses. One list call per kind finds the drift; only drifted objects are written
    (created again, patched, or replaced whole for quotas). An object that is not ours, or
    that the API server refuses, is reported and left alone; the other objects are still
    repaired."""
    kube = cluster_clients.kube_for(cluster)
    desired = list(m.priority_class_manifests())
    for team in Team.objects.order_by("pk"):
        desired += m.team_manifests(team_spec(team))
    current: dict[tuple[str, str, str], dict[str, Any]] = {}
    for api_version, kind in dict.fromkeys((d["apiVersion"], d["kind"]) for d in desired):
        for obj in kube.list_owned(api_version, kind):
            meta = obj.get("metadata") or {}
            current[(kind, str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    result = DriftResult(checked=len(desired))
    for manifest in desired:
        meta = manifest["metadata"]
        key = (manifest["kind"], str(meta.get("namespace") or ""), str(meta["name"]))
        if not _drifted(manifest, current.get(key)):
            continue
        what = f"{key[0]} {key[1] + '/' if key[1] else ''}{key[2]}"
        try:
            result.repaired.append(kube.apply(manifest))
        except (ForeignObjectError, ClusterRefused) as exc:
            result.failed.append(f"{what}: {exc}")
            continue
        log.warning("cluster %s: %s had drifted from what gpupaas set; restored", cluster, what)
    return result
