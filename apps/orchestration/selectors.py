"""Reads for orchestration: which cluster a workload lives on, and its manifest inputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.resources import GpuClassSpec, gpu_resources
from apps.orchestration import manifests as m
from apps.quotas.models import TeamQuota
from apps.workloads import core as wl
from apps.workloads.models import Workload

# Workloads whose objects should exist, and those whose objects should be gone.
LIVE_STATES = (wl.ADMITTED, wl.STARTING, wl.RUNNING)
GONE_STATES = (
    wl.SUCCEEDED,
    wl.FAILED,
    wl.CANCELLED,
    wl.EXPIRED,
    wl.PREEMPTED,
    wl.SUSPENDED,
    wl.QUEUED,
)
# Pod annotations a request may carry through (the simulated cluster's behaviour knobs).
PASS_THROUGH_ANNOTATION_PREFIXES = ("kubesim.io/",)


def enabled_clusters() -> QuerySet[Cluster]:
    return Cluster.objects.filter(enabled=True).order_by("name")


def cluster_of(workload: Workload) -> Cluster | None:
    """The workload's cluster: where it was admitted, else the only enabled cluster."""
    if workload.cluster_id is not None:
        return workload.cluster
    clusters = list(enabled_clusters()[:2])
    return clusters[0] if len(clusters) == 1 else None


def gpu_class_spec(gpu_class: GpuClass) -> GpuClassSpec:
    return gpu_class.spec()


def team_spec(team: Team) -> m.TeamSpec:
    quotas = TeamQuota.objects.filter(team=team).select_related("gpu_class")
    return m.TeamSpec(
        slug=team.slug,
        namespace=team.namespace,
        quotas=tuple(
            m.TeamQuotaSpec(gpu_class_spec(q.gpu_class), q.limit_milli)
            for q in quotas.order_by("gpu_class__name")
        ),
        ingress_namespace=settings.NOTEBOOK_INGRESS_NAMESPACE,
    )


def placement_replicas(
    placement: Any, node_uuids: Mapping[str, Sequence[str]] | None = None
) -> tuple[m.ReplicaPlacement, ...]:
    """The scheduler's placement JSON as one entry per replica (empty when not placed).

    Each replica names its node and the indices of its GPUs there; ``node_uuids`` (from the
    node inventory) turns indices into GPU UUIDs where the sharing mode pins devices (HAMi).
    """
    entries = placement.get("replicas", []) if isinstance(placement, Mapping) else placement
    result = []
    for entry in entries or []:
        if not (isinstance(entry, Mapping) and entry.get("node")):
            continue
        node = str(entry["node"])
        uuids = tuple(str(u) for u in entry.get("gpu_uuids") or ())
        if not uuids and node_uuids and node in node_uuids:
            known = node_uuids[node]
            uuids = tuple(known[i] for i in entry.get("gpus") or () if 0 <= int(i) < len(known))
        result.append(m.ReplicaPlacement(node=node, gpu_uuids=uuids))
    return tuple(result)


def node_uuids_for(workload: Workload) -> dict[str, list[str]]:
    """GPU UUIDs of the nodes a HAMi workload was placed on (other modes need none)."""
    if workload.gpu_class.sharing_mode != "hami" or not workload.placement:
        return {}
    nodes = [r.node for r in placement_replicas(workload.placement)]
    rows = ClusterNode.objects.filter(name__in=nodes)
    if workload.cluster_id is not None:
        rows = rows.filter(cluster_id=workload.cluster_id)
    return {n.name: list(n.gpu_uuids or []) for n in rows}


def home_claim_name(workload: Workload) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in workload.owner.get_username().lower())
    return f"home-{slug.strip('-')[:50] or workload.owner_id}"


def workload_spec(workload: Workload) -> m.WorkloadSpec:
    gpu = gpu_class_spec(workload.gpu_class)
    limits = dict(gpu_resources(workload.gpu_milli, gpu).limits)
    profiles = {
        r.get("mig_profile")
        for r in (workload.placement or {}).get("replicas", [])
        if isinstance(r, Mapping) and r.get("mig_profile")
    }
    if gpu.sharing_mode == "mig" and len(profiles) == 1:
        # The scheduler placed the request on a free instance of this profile: ask for it.
        limits = {f"nvidia.com/mig-{profiles.pop()}": "1"}
    params = workload.params or {}
    annotations = {
        str(k): str(v)
        for k, v in (params.get("pod_annotations") or {}).items()
        if str(k).startswith(PASS_THROUGH_ANNOTATION_PREFIXES)
    }
    grid = {str(k): [str(x) for x in v] for k, v in (params.get("grid") or {}).items()}
    return m.WorkloadSpec(
        id=workload.pk,
        name=workload.name,
        kind=workload.kind,
        team_slug=workload.team.slug,
        namespace=workload.team.namespace,
        owner=workload.owner.get_username(),
        image=workload.image.reference,
        read_only_root=workload.image.read_only_root,
        gpu_limits=limits,
        gpu_product=workload.gpu_class.product_label,
        sharing_mode=workload.gpu_class.sharing_mode,
        priority_class=workload.priority_class,
        replicas=workload.replicas,
        gpus_per_replica=max(1, workload.gpu_milli // 1000),
        cpu_milli=workload.cpu_milli,
        memory_mib=workload.memory_mib,
        command=tuple(workload.command or ()),
        args=tuple(workload.args or ()),
        env={str(k): str(v) for k, v in (workload.env or {}).items()},
        secret_env=tuple(
            m.SecretEnv(secret=str(r["k8s_name"]), env=str(r.get("env") or ""), key=str(r["key"]))
            for r in workload.secrets or ()
            if isinstance(r, Mapping) and r.get("k8s_name")
        ),
        max_runtime_seconds=workload.max_runtime_seconds,
        retries=workload.retries,
        placement=placement_replicas(workload.placement, node_uuids_for(workload)),
        pod_annotations=annotations,
        sweep_grid=grid,
        notebook_host=settings.NOTEBOOK_HOST,
        home_claim=home_claim_name(workload),
        home_size=settings.NOTEBOOK_HOME_SIZE,
    )
