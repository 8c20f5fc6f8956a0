"""Node health writes: each node's report from its latest GPU metrics, and the verdict on the
inventory's node (a failed one gets no new placements)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone

from apps.catalog.models import ClusterNode
from apps.telemetry import core
from apps.telemetry.models import (
    NodeHealthReport,
)
from apps.telemetry.prom import PrometheusClient, default_client
from apps.telemetry.selectors import node_resolver
from apps.telemetry.services.ingest import exporter_targets

# --- node health -------------------------------------------------------------------------

HEALTH_METRICS = (
    core.GPU_TEMP,
    core.POWER_USAGE,
    core.XID_ERRORS,
    core.ECC_SBE_TOTAL,
    core.ECC_DBE_TOTAL,
    core.FB_USED,
    core.FB_FREE,
)


def node_health_store(
    nodes: Mapping[str, core.NodeHealth], *, now: datetime | None = None
) -> list[NodeHealthReport]:
    """Judge and store each node's report, against the inventory's GPU count where known; the
    verdict goes onto the inventory's node too (a failed one gets no new placements)."""
    moment = now or timezone.now()
    inventory = {n.name: n for n in ClusterNode.objects.filter(name__in=list(nodes))}
    stored = []
    for hostname, node in nodes.items():
        known = inventory.get(hostname)
        expected = known.gpu_count if known is not None and known.gpu_count else None
        core.health_verdict(node, expected_gpus=expected)
        report, _ = NodeHealthReport.objects.update_or_create(
            hostname=hostname,
            defaults={
                "cluster_node": known,
                "source": node.source,
                "gpu_count": len(node.gpus),
                "expected_gpu_count": expected,
                "models_seen": node.models[:300],
                "driver_version": node.driver_version[:64],
                "memory_mib": max((g.memory_mib for g in node.gpus), default=0),
                "max_temperature_c": max(
                    (g.temperature_c for g in node.gpus if g.temperature_c is not None),
                    default=None,
                ),
                "ecc_single_bit": sum(g.ecc_sbe for g in node.gpus),
                "ecc_double_bit": sum(g.ecc_dbe for g in node.gpus),
                "xid_errors": [{"gpu": g.index, "xid": g.xid} for g in node.gpus if g.xid],
                "gpus": [g.as_dict() for g in node.gpus],
                "verdict": node.verdict,
                "problems": node.problems,
                "reported_as": node.reported_as,
                "reported_at": moment,
            },
        )
        if known is not None:
            # The scheduler reads the verdict from the inventory: a failed node takes no work,
            # a degraded one takes none on its faulty GPUs.
            ClusterNode.objects.filter(pk=known.pk).update(
                health_verdict=node.scheduling_verdict,
                health_problems=node.problems[:20],
                gpu_faults=_faults_on_inventory(node.gpu_faults, known),
            )
        stored.append(report)
    return stored


def _faults_on_inventory(faults: list[core.GpuFault], node: ClusterNode) -> list[dict[str, str]]:
    """The faults with each GPU's index as the inventory orders the node's GPUs (by UUID;
    the exporter's own index where the inventory does not know the UUID)."""
    order = {uuid: i for i, uuid in enumerate(node.gpu_uuids or ())}
    out = []
    for fault in faults:
        row = fault.as_dict()
        if fault.uuid in order:
            row["index"] = str(order[fault.uuid])
        out.append(row)
    return out


def node_health_refresh(*, client: PrometheusClient | None = None) -> list[NodeHealthReport]:
    """Read every node's latest GPU metrics from Prometheus and store its health report, under
    the node's name as the cluster gives it (:func:`node_resolver`)."""
    own_client = client is None
    prometheus = client or default_client()
    try:
        names = "|".join(HEALTH_METRICS)
        result = prometheus.query(f'{{__name__=~"{names}"}}')
        exporters = exporter_targets(prometheus)
    finally:
        if own_client:
            prometheus.close()
    samples = [
        core.Sample(
            str(item["metric"].get("__name__", "")), item["metric"], float(item["value"][1])
        )
        for item in result
    ]
    resolver = node_resolver()
    return node_health_store(
        core.node_health_from_samples(samples, resolver=resolver, exporters=exporters)
    )
