"""The scheduler's writes and dry runs, one module per concern, each name importable from here:
:mod:`.cycle` (the scheduling cycle and the persisting of its decisions), :mod:`.preview`
(what a request would meet if submitted now), :mod:`.drain` (moving work off nodes drained
for maintenance and off GPUs that fell off the bus)."""

from __future__ import annotations

from apps.scheduling.services.cycle import (
    CYCLE_LOCK_KEY,
    WAITING_FIELDS,
    CycleRun,
    Rows,
    _store_waiting,
    scheduling_cycle_run,
    scheduling_policy,
)
from apps.scheduling.services.drain import (
    gpu_fault_pass,
    node_drain_pass,
)
from apps.scheduling.services.preview import (
    DryRun,
    PreemptionVictim,
    RequestVerdict,
    confirmation_needed,
    preemption_preview,
    request_dry_run,
    request_verdict,
    teammates_to_preempt,
)

__all__ = [
    "CYCLE_LOCK_KEY",
    "WAITING_FIELDS",
    "CycleRun",
    "DryRun",
    "PreemptionVictim",
    "RequestVerdict",
    "Rows",
    "_store_waiting",
    "confirmation_needed",
    "gpu_fault_pass",
    "node_drain_pass",
    "preemption_preview",
    "request_dry_run",
    "request_verdict",
    "scheduling_cycle_run",
    "scheduling_policy",
    "teammates_to_preempt",
]
