"""Portal pages for workloads, by concern: ``dashboard`` (the home page and its live partials),
``submit`` (the request forms, their verdict and sizing helper; a clone), ``request_templates``,
``detail`` (a workload's page, status and events), ``logs`` (tail, download, live stream) and
``actions`` (cancel, suspend, resume), with the lookups they share (``common``).

Views are thin: they validate input, call one service or selector and render. Every
workload view looks the workload up through ``workload_for_user``, so another team's ids
give 404 whatever the URL. The views the URL conf names are importable from here.
"""

from apps.web.views.workloads.actions import (
    workload_cancel_view,
    workload_resume_view,
    workload_suspend_view,
)
from apps.web.views.workloads.dashboard import (
    dashboard_capacity_partial,
    dashboard_workloads_partial,
    gpu_label,
    home,
)
from apps.web.views.workloads.detail import (
    duration_label,
    placement_rows,
    workload_detail,
    workload_events_partial,
    workload_status_partial,
)
from apps.web.views.workloads.logs import (
    workload_logs_download,
    workload_logs_partial,
    workload_logs_stream,
)
from apps.web.views.workloads.request_templates import (
    template_delete,
    template_list,
)
from apps.web.views.workloads.submit import (
    sizing_helper,
    workload_clone_view,
    workload_new,
    workload_new_gpu_fields,
    workload_new_start,
    workload_new_verdict,
)

__all__ = [
    "dashboard_capacity_partial",
    "dashboard_workloads_partial",
    "duration_label",
    "gpu_label",
    "home",
    "placement_rows",
    "sizing_helper",
    "template_delete",
    "template_list",
    "workload_cancel_view",
    "workload_clone_view",
    "workload_detail",
    "workload_events_partial",
    "workload_logs_download",
    "workload_logs_partial",
    "workload_logs_stream",
    "workload_new",
    "workload_new_gpu_fields",
    "workload_new_start",
    "workload_new_verdict",
    "workload_resume_view",
    "workload_status_partial",
    "workload_suspend_view",
]
