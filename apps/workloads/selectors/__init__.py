"""The workloads' reads, by concern: ``visibility`` (who may see and manage which workloads, the
portal's reads of them), ``listing`` (the API's and the portal's lists: filters, sorting, pages
read in one query), ``context`` (what a request is checked against, the rules' Context, and the
preemption grace periods) and ``usage`` (what teams hold and may ask for: quota usage and bars,
free capacity per GPU class, the classes a team's request form offers). Their names are
importable from here."""

from apps.workloads.selectors.context import (
    preemption_grace_seconds,
    request_context,
)
from apps.workloads.selectors.listing import (
    SORT_LABELS,
    SORTS,
    WorkloadFilters,
    WorkloadListing,
    day_start,
    workloads_filtered,
)
from apps.workloads.selectors.usage import (
    ClassOffer,
    GpuClassCapacity,
    QuotaBar,
    QuotaUsage,
    class_offers_for_team,
    gpu_class_capacity,
    quota_bars_for_teams,
    quota_usage_for_teams,
    usable_class_ids_for,
)
from apps.workloads.selectors.visibility import (
    request_template_for_user,
    request_templates_for,
    team_workloads,
    waiting_workloads_for_teams,
    workload_for_user,
    workload_may_manage,
    workload_may_open,
    workloads_visible_to,
)

__all__ = [
    "SORTS",
    "SORT_LABELS",
    "ClassOffer",
    "GpuClassCapacity",
    "QuotaBar",
    "QuotaUsage",
    "WorkloadFilters",
    "WorkloadListing",
    "class_offers_for_team",
    "day_start",
    "gpu_class_capacity",
    "preemption_grace_seconds",
    "quota_bars_for_teams",
    "quota_usage_for_teams",
    "request_context",
    "request_template_for_user",
    "request_templates_for",
    "team_workloads",
    "usable_class_ids_for",
    "waiting_workloads_for_teams",
    "workload_for_user",
    "workload_may_manage",
    "workload_may_open",
    "workloads_filtered",
    "workloads_visible_to",
]
