"""Live reads from Prometheus: the GPU heat map by node, and one workload's utilisation and
memory over its run. Nodes are named as the cluster names them (:func:`node_resolver`)."""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.accounts.models import User
from apps.catalog.models import ClusterNode
from apps.orchestration import cluster_reads
from apps.orchestration.errors import ClusterError
from apps.orchestration.selectors import enabled_clusters
from apps.telemetry import core
from apps.telemetry.models import NodeHealthReport, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.telemetry.selectors.heat import HeatNode, Holder, heat_nodes
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import workloads_visible_to

log = logging.getLogger(__name__)


# --- live views from Prometheus -----------------------------------------------------------


def node_resolver(*, with_cluster: bool = True) -> core.NodeResolver:
    """Node names as the cluster gives them: the inventory (names, GPU UUIDs), the nodes the
    exporter pods run on (read from the clusters when ``with_cluster``, else as last
    recorded by the node health reports)."""
    nodes: set[str] = set()
    uuids: dict[str, str] = {}
    for name, gpu_uuids in ClusterNode.objects.filter(cluster__enabled=True).values_list(
        "name", "gpu_uuids"
    ):
        nodes.add(name)
        for uuid in gpu_uuids or ():
            uuids[str(uuid)] = name
    exporters: dict[str, str] = {}
    for hostname, aliases in NodeHealthReport.objects.values_list("hostname", "reported_as"):
        for alias in aliases or ():
            exporters[str(alias)] = hostname
    pod_nodes: dict[tuple[str, str], str] = {}
    if with_cluster:
        for cluster in enabled_clusters():
            try:
                exporters.update(cluster_reads.exporter_pod_nodes(cluster))
                for pod in cluster_reads.labelled_pods(cluster):
                    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
                    if spec.get("nodeName"):
                        key = (str(meta.get("namespace")), str(meta.get("name")))
                        pod_nodes[key] = str(spec["nodeName"])
            except ClusterError as exc:
                log.warning("telemetry: pods of cluster %s unknown: %s", cluster.name, exc)
    return core.NodeResolver(frozenset(nodes), exporters, pod_nodes, uuids)


def heatmap(client: PrometheusClient, viewer: User) -> list[HeatNode]:
    """Every physical GPU by node, with its MIG instances or time slices inside, their
    utilisation over the last minute ("no data" where it exports none) and who holds them
    (see :func:`heat_nodes`). Nodes are named as the cluster names them (the inventory and
    the last health reports)."""
    samples: list[core.Sample] = []
    # Memory is exported by every GPU and MIG instance: it lists the devices.
    for name in (core.GPU_UTIL, core.GR_ENGINE_ACTIVE, core.FB_USED):
        samples += core.samples_from_vector(name, client.query(f"avg_over_time({name}[1m])"))
    exporters = core.exporter_targets(client.query(core.EXPORTER_TARGETS_QUERY))
    readings = core.readings_from_samples(
        samples, exporters=exporters, resolver=node_resolver(with_cluster=False)
    )
    usages = WorkloadUsage.objects.filter(workload__state__in=(wl.STARTING, wl.RUNNING))
    pod_owner: dict[tuple[str, str], int] = {}
    for workload_id, pods in usages.values_list("workload_id", "pods"):
        for namespace, pod in pods or []:
            pod_owner[(namespace, pod)] = workload_id
    owners = set(pod_owner.values())
    visible = set(workloads_visible_to(viewer).filter(pk__in=owners).values_list("pk", flat=True))
    # Every GPU says who holds it: the team always, the workload where the viewer may open it.
    holders = {
        pk: Holder(team, name, pk) if pk in visible else Holder(team)
        for pk, name, team in Workload.objects.filter(pk__in=owners).values_list(
            "pk", "name", "team__name"
        )
    }
    inventory = ClusterNode.objects.filter(cluster__enabled=True).values_list("name", "gpu_uuids")
    return heat_nodes(readings, pod_owner=pod_owner, holders=holders, inventory=inventory)


def workload_series(
    client: PrometheusClient, workload: Workload, *, now: datetime | None = None
) -> dict[str, Any]:
    """Utilisation (%) and memory (MiB) of a workload's GPUs over its run (at most 24 h)."""
    moment = now or timezone.now()
    usage = WorkloadUsage.objects.filter(workload=workload).first()
    pods = [pod for _, pod in (usage.pods if usage else [])]
    namespace = workload.team.namespace
    end = workload.finished_at or moment
    start = max(workload.started_at or end - timedelta(hours=1), end - timedelta(hours=24))
    if end - start < timedelta(minutes=5):
        start = end - timedelta(minutes=5)
    step = max(1.0, (end - start).total_seconds() / 400)
    result: dict[str, Any] = {"x": [], "utilisation": [], "memory_mib": []}
    if not pods:
        return result
    active = core.pod_series_selectors("gpupaas:gpu_active:ratio", namespace, pods)
    memory = core.pod_series_selectors(core.FB_USED, namespace, pods)
    # On a shared GPU each pod's series is its share of the whole GPU: show it relative to what
    # the workload was allocated, as accounting does.
    scale = 100.0
    if workload.gpu_class.sharing_mode in ("timeslice", "hami") and workload.charged_milli < 1000:
        scale = 100.0 * 1000 / workload.charged_milli
    util_rows = client.query_range(f"clamp_max(avg({active}) * {scale:g}, 100)", start, end, step)
    mem_rows = client.query_range(f"sum({memory})", start, end, step)
    points: dict[float, dict[str, float]] = defaultdict(dict)
    for name, rows in (("utilisation", util_rows), ("memory_mib", mem_rows)):
        for row in rows:
            for ts, value in row.get("values") or []:
                number = float(value)
                if not math.isnan(number):
                    points[float(ts)][name] = round(number, 2)
    for ts in sorted(points):
        result["x"].append(ts)
        result["utilisation"].append(points[ts].get("utilisation"))
        result["memory_mib"].append(points[ts].get("memory_mib"))
    return result
