"""Converge Kubernetes to the database, and the database to what Kubernetes reports.

Idempotent by construction: object names come from the workload id, creating twice is
harmless (409 on an object with our labels), and names we created are stored on the
workload, so a worker killed at any line leaves nothing orphaned after the next pass.

One module per concern: ``teams`` (namespaces, drift repair), ``inventory`` (GPU nodes),
``archiving`` (logs and events before the objects go), ``objects`` (one workload's objects
created or deleted), ``reconcile`` (the pass over a cluster), ``lost_gangs`` (gangs on a
lost node), ``status_sync`` (pod phases as workload states), ``trial_metrics`` (running
trials' metrics lines). What other modules use is importable from here.
"""

from __future__ import annotations

from apps.orchestration.selectors import workload_spec
from apps.orchestration.services.archiving import (
    ArchiveResult,
    log_archive_purge,
    workload_archive,
)
from apps.orchestration.services.device_taints import TaintResult, device_taints_sync
from apps.orchestration.services.inventory import (
    MAX_NODE_IMAGE_NAMES,
    cluster_inventory_store,
    cluster_inventory_sync,
    node_image_names,
)
from apps.orchestration.services.lost_gangs import (
    NodeLossResult,
    lost_gangs_restart,
)
from apps.orchestration.services.objects import (
    API_VERSIONS,
    HOME_CLAIM_ATTEMPTS,
    OWNED_KINDS,
    STARTING_REASON,
    UNREACHABLE_REASON,
    WORKLOAD_KINDS,
    home_volume_ensure,
    workload_reconcile,
)
from apps.orchestration.services.reconcile import (
    ReconcileResult,
    gone_clean_up,
    reconcile_pass,
)
from apps.orchestration.services.status_sync import (
    SyncResult,
    endpoint_rollouts_check,
    observe,
    status_sync_observed,
    status_sync_pass,
)
from apps.orchestration.services.teams import (
    DriftResult,
    drift_repair_pass,
    team_namespace_ensure,
)
from apps.orchestration.services.trial_metrics import (
    TRIAL_METRICS_PER_PASS,
    TRIAL_METRICS_TAIL_LINES,
    MetricsResult,
    live_metrics_store,
    trial_metrics_pass,
)

__all__ = [
    "API_VERSIONS",
    "HOME_CLAIM_ATTEMPTS",
    "MAX_NODE_IMAGE_NAMES",
    "OWNED_KINDS",
    "STARTING_REASON",
    "TRIAL_METRICS_PER_PASS",
    "TRIAL_METRICS_TAIL_LINES",
    "UNREACHABLE_REASON",
    "WORKLOAD_KINDS",
    "ArchiveResult",
    "DriftResult",
    "MetricsResult",
    "NodeLossResult",
    "ReconcileResult",
    "SyncResult",
    "TaintResult",
    "cluster_inventory_store",
    "cluster_inventory_sync",
    "device_taints_sync",
    "drift_repair_pass",
    "endpoint_rollouts_check",
    "gone_clean_up",
    "home_volume_ensure",
    "live_metrics_store",
    "log_archive_purge",
    "lost_gangs_restart",
    "node_image_names",
    "observe",
    "reconcile_pass",
    "status_sync_observed",
    "status_sync_pass",
    "team_namespace_ensure",
    "trial_metrics_pass",
    "workload_archive",
    "workload_reconcile",
    "workload_spec",
]
