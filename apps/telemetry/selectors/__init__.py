"""Telemetry reads, one module per concern, each name of :mod:`.usage` and :mod:`.live`
importable from here: :mod:`.usage` (rollups per team, user and class, chargeback, the idle
list; from the database), :mod:`.live` (the heat map and per-workload series; from
Prometheus), :mod:`.overview` (the platform overview for admins and leads) and
:mod:`.rightsizing` (right-sizing advice)."""

from __future__ import annotations

from apps.telemetry.selectors.heat import HeatCell, HeatGpu, HeatNode, Holder
from apps.telemetry.selectors.live import (
    heatmap,
    node_resolver,
    workload_series,
)
from apps.telemetry.selectors.usage import (
    CHARGEBACK_GROUP,
    Reclaimed,
    UsageSeries,
    UsageTotal,
    chargeback,
    idle_workloads,
    month_bounds,
    open_notices_for,
    reclaimed,
    team_rows,
    top_idle_cost,
    usage_of,
    usage_series,
    usage_totals,
    user_rows,
)

__all__ = [
    "CHARGEBACK_GROUP",
    "HeatCell",
    "HeatGpu",
    "HeatNode",
    "Holder",
    "Reclaimed",
    "UsageSeries",
    "UsageTotal",
    "chargeback",
    "heatmap",
    "idle_workloads",
    "month_bounds",
    "node_resolver",
    "open_notices_for",
    "reclaimed",
    "team_rows",
    "top_idle_cost",
    "usage_of",
    "usage_series",
    "usage_totals",
    "user_rows",
    "workload_series",
]
