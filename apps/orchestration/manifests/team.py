"""A team's namespace and what lives in it beside workloads: quota, limits, network
policies, the portal's binding, the shared volume, credentials; and the priority classes.
Pure."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.catalog.resources import DEVICE_QUOTA_SUFFIX, GpuClassSpec, quota_resources
from apps.orchestration.manifests.base import (
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_SECRET_SCOPE,
    LABEL_TEAM,
    LIMIT_RANGE_NAME,
    MANAGED_BY,
    NOTEBOOK_PORT,
    PRIORITY_DESCRIPTIONS,
    PRIORITY_VALUES,
    QUOTA_NAME,
    SERVICE_ACCOUNT,
    Manifest,
    object_meta,
    priority_class_name,
    team_claim_name,
)
from apps.orchestration.manifests.endpoints import endpoint_prefix
from apps.orchestration.manifests.notebooks import notebook_prefix
from apps.orchestration.manifests.routes import (
    UNKNOWN_ENDPOINT,
    UNKNOWN_ID,
    UNKNOWN_NOTEBOOK,
    unknown_route_manifests,
)
from apps.orchestration.manifests.spec import GatewayShape
from apps.workloads import core as wl


def priority_class_manifests() -> list[Manifest]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": object_meta(priority_class_name(priority)),
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": "Never"
            if priority == wl.PRIORITY_BATCH
            else "PreemptLowerPriority",
            "description": PRIORITY_DESCRIPTIONS[priority],
        }
        for priority, value in PRIORITY_VALUES.items()
    ]


@dataclass(frozen=True)
class TeamQuotaSpec:
    gpu_class: GpuClassSpec
    limit_milli: int


@dataclass(frozen=True)
class TeamSpec:
    slug: str
    namespace: str
    quotas: tuple[TeamQuotaSpec, ...] = ()
    ingress_namespace: str = "ingress-nginx"
    # Object counts the namespace may hold (``count/pods`` → 1000): what a team can store
    # in the cluster's database is bounded whatever its GPU quota.
    object_counts: Mapping[str, int] = field(default_factory=dict)
    # The shared volume (empty size: none) and what all the team's claims may request.
    volume_size: str = ""
    volume_storage_class: str = ""
    storage_quota: str = ""
    # The portal's own identity on the cluster (``namespace/name`` of its ServiceAccount) and
    # the ClusterRole it holds in team namespaces (the Helm chart's ``-team`` role): with
    # both set, each team namespace gets a RoleBinding granting that role there, and nowhere
    # else. Empty: the portal runs with a kubeconfig that already may do everything.
    portal_service_account: str = ""
    portal_team_role: str = ""
    # Endpoints on the platform's Gateway (``gateway`` set, with the endpoint host and the
    # portal's endpoint auth address): the namespace's endpoint paths that name no endpoint
    # are answered by the portal as a wrong key is (manifests.routes.UNKNOWN_ENDPOINT).
    gateway: GatewayShape | None = None
    endpoint_host: str = ""
    endpoint_auth_url: str = ""
    # Notebooks on the Gateway under one host, a path each (NOTEBOOK_HOST): the namespace's
    # notebook paths that name no notebook are answered as someone else's notebook is.
    notebook_host: str = ""
    notebook_auth_url: str = ""


PORTAL_ROLE_BINDING = "gpupaas-portal"


def portal_role_binding_manifest(team: TeamSpec) -> list[Manifest]:
    """The RoleBinding that lets the portal manage the team's namespace, if it runs least
    privileged (see TeamSpec.portal_service_account)."""
    if not (team.portal_service_account and team.portal_team_role):
        return []
    sa_namespace, _, sa_name = team.portal_service_account.partition("/")
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": object_meta(PORTAL_ROLE_BINDING, team.namespace, **{LABEL_TEAM: team.slug}),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": team.portal_team_role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}],
        }
    ]


def team_volume_manifest(team: TeamSpec) -> Manifest:
    """The team's shared ReadWriteMany volume, mounted at TEAM_MOUNT in notebooks and jobs.
    Not labelled with a workload: it outlives them all."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": team.volume_size}},
    }
    if team.volume_storage_class:
        spec["storageClassName"] = team.volume_storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": object_meta(team_claim_name(), team.namespace, **{LABEL_TEAM: team.slug}),
        "spec": spec,
    }


def storage_hard(team: TeamSpec) -> dict[str, str]:
    """The storage every claim of the namespace may request together."""
    return {"requests.storage": team.storage_quota} if team.storage_quota else {}


def quota_hard(quotas: Sequence[TeamQuotaSpec]) -> dict[str, str]:
    """The team's limits per GPU resource, so Kubernetes enforces the ceiling a second time.

    Classes that share a resource name add up. A MIG class caps each profile at the number
    of instances the limit could buy; a HAMi class caps both vGPUs and their memory.
    """
    hard: dict[str, int] = {}
    for quota in quotas:
        for resource, amount in quota_resources(quota.limit_milli, quota.gpu_class).items():
            key = resource if resource.endswith(DEVICE_QUOTA_SUFFIX) else f"requests.{resource}"
            hard[key] = hard.get(key, 0) + amount
    return {k: str(v) for k, v in sorted(hard.items())}


def canonical_count(value: int) -> str:
    """A whole number as the API server writes it back (1000 → "1k"), so that a quota we
    set reads back equal and is not replaced on every pass."""
    for suffix, exponent in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if value and value % 10**exponent == 0:
            return f"{value // 10**exponent}{suffix}"
    return str(value)


def object_count_hard(counts: Mapping[str, int]) -> dict[str, str]:
    """Object-count limits as ResourceQuota keys (``count/jobs.batch``, ``count/pods``, …)."""
    return {key: canonical_count(int(value)) for key, value in sorted(counts.items())}


def _namespace_manifest(team: TeamSpec) -> Manifest:
    """The namespace, held to the restricted pod security standard."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": team.namespace,
            "labels": {
                LABEL_MANAGED_BY: MANAGED_BY,
                LABEL_TEAM: team.slug,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/audit": "restricted",
            },
        },
    }


def _limit_manifests(team: TeamSpec) -> list[Manifest]:
    """The workloads' service account, the namespace's quota and its container defaults."""
    ns, team_label = team.namespace, {LABEL_TEAM: team.slug}
    hard = {
        **quota_hard(team.quotas),
        **object_count_hard(team.object_counts),
        **storage_hard(team),
    }
    defaults = {
        "type": "Container",
        "default": {"cpu": "1", "memory": "2Gi"},
        "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": object_meta(SERVICE_ACCOUNT, ns, **team_label),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": object_meta(QUOTA_NAME, ns, **team_label),
            "spec": {"hard": hard},
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": object_meta(LIMIT_RANGE_NAME, ns, **team_label),
            "spec": {"limits": [defaults]},
        },
    ]


def _network_policy(team: TeamSpec, name: str, spec: dict[str, Any]) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": object_meta(name, team.namespace, **{LABEL_TEAM: team.slug}),
        "spec": spec,
    }


def _namespace_selector(namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


_KUBE_DNS_PODS = {"matchLabels": {"k8s-app": "kube-dns"}}


def _network_policies(team: TeamSpec) -> list[Manifest]:
    """Nothing in or out, except DNS, and the ingress controller to the notebooks."""
    dns = {
        "to": [{**_namespace_selector("kube-system"), "podSelector": _KUBE_DNS_PODS}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }
    notebooks = {
        "from": [_namespace_selector(team.ingress_namespace)],
        "ports": [{"protocol": "TCP", "port": NOTEBOOK_PORT}],
    }
    return [
        _network_policy(
            team, "default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        ),
        _network_policy(
            team, "allow-dns", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [dns]}
        ),
        _network_policy(
            team,
            "allow-notebook-ingress",
            {
                "podSelector": {"matchLabels": {LABEL_KIND: wl.KIND_NOTEBOOK}},
                "policyTypes": ["Ingress"],
                "ingress": [notebooks],
            },
        ),
    ]


def unknown_routes(team: TeamSpec) -> list[Manifest]:
    """The routes that answer for the team's endpoints and notebooks that do not exist (none
    without a Gateway, or without the host and the auth address)."""
    if team.gateway is None:
        return []
    manifests: list[Manifest] = []
    for name, host, prefix, auth_url in (
        (UNKNOWN_ENDPOINT, team.endpoint_host, endpoint_prefix, team.endpoint_auth_url),
        (UNKNOWN_NOTEBOOK, team.notebook_host, notebook_prefix, team.notebook_auth_url),
    ):
        if host and auth_url:
            manifests += unknown_route_manifests(
                object_meta(name, team.namespace, **{LABEL_TEAM: team.slug}),
                team.gateway,
                hostname=host,
                path=prefix(team.namespace),
                auth_url=f"{auth_url.rstrip('/')}/{UNKNOWN_ID}/",
            )
    return manifests


def team_manifests(team: TeamSpec) -> list[Manifest]:
    """Everything a team namespace needs, in the order it should be applied."""
    return [
        _namespace_manifest(team),
        # Before everything else in the namespace: without it a least-privileged portal may
        # create nothing there.
        *portal_role_binding_manifest(team),
        *_limit_manifests(team),
        *_network_policies(team),
        # After the quota, which counts it.
        *([team_volume_manifest(team)] if team.volume_size else []),
        *unknown_routes(team),
    ]


def credential_secret_manifest(
    *, namespace: str, name: str, team_slug: str, personal: bool, data: Mapping[str, str]
) -> Manifest:
    """A team or personal credential: a Secret in the team namespace under its stored name.
    Not labelled with a workload: it outlives them, and the reconciler's sweeps leave it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": object_meta(
            name,
            namespace,
            **{LABEL_TEAM: team_slug, LABEL_SECRET_SCOPE: "personal" if personal else "team"},
        ),
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode("ascii") for k, v in sorted(data.items())},
    }
