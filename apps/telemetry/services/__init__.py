"""Telemetry writes, one module per concern, each name of the ingestion pass, idle and node
health importable from here: :mod:`.ingest` (the ingestion pass), :mod:`.accounting` (its
GPU time written per workload and day), :mod:`.idle` (idle policies, Jupyter activity, warn,
suspend and flag), :mod:`.health` (node health reports), :mod:`.records` (the pass's plain
records); :mod:`.spend` (budget spend) and :mod:`.rightsizing` (applying right-sizing advice)
are modules of their own."""

from __future__ import annotations

from apps.telemetry.services.health import (
    HEALTH_METRICS,
    node_health_refresh,
    node_health_store,
)
from apps.telemetry.services.idle import (
    PolicyBook,
    idle_notice_dismiss,
    idle_policy_delete,
    idle_policy_save,
    notebook_activity_refresh,
    telemetry_idle_suspend,
)
from apps.telemetry.services.ingest import (
    _fetch_samples,
    exporter_targets,
    pod_index_build,
    pod_index_from_clusters,
    telemetry_ingest,
)
from apps.telemetry.services.records import (
    ACTED_KINDS,
    ENDED_HOLDING_STATES,
    HELD_FIELDS,
    USAGE_FIELDS,
    DayIncrement,
    Held,
    IngestResult,
    PodIndex,
    UsageState,
)

__all__ = [
    "ACTED_KINDS",
    "ENDED_HOLDING_STATES",
    "HEALTH_METRICS",
    "HELD_FIELDS",
    "USAGE_FIELDS",
    "DayIncrement",
    "Held",
    "IngestResult",
    "PodIndex",
    "PolicyBook",
    "UsageState",
    "_fetch_samples",
    "exporter_targets",
    "idle_notice_dismiss",
    "idle_policy_delete",
    "idle_policy_save",
    "node_health_refresh",
    "node_health_store",
    "notebook_activity_refresh",
    "pod_index_build",
    "pod_index_from_clusters",
    "telemetry_idle_suspend",
    "telemetry_ingest",
]
