"""Workloads over the REST API, by concern: ``submit`` (list, submit, idempotent, its dry run and
validation; a clone), ``detail`` (one workload, a sweep's trials), ``actions`` (cancel, suspend,
resume), ``logs`` (logs and events), with the preemption question (``preemption``), the OpenAPI
parameters and examples they share (``openapi``) and the lookups every view makes (``common``).

Every lookup goes through ``workloads_visible_to``: another team's workload is 404, never 403,
so ids cannot be probed. Managing (cancel, suspend, resume) is checked again by the services:
a teammate who is neither owner nor lead gets 403. The views the URL conf names are importable
from here.
"""

from apps.api.views.workloads.actions import (
    WorkloadCancelView,
    WorkloadResumeView,
    WorkloadSuspendView,
)
from apps.api.views.workloads.detail import (
    WorkloadDetailView,
    WorkloadTrialsView,
)
from apps.api.views.workloads.logs import (
    WorkloadEventsView,
    WorkloadLogsView,
)
from apps.api.views.workloads.submit import (
    WorkloadCloneView,
    WorkloadListView,
    WorkloadValidateView,
)

__all__ = [
    "WorkloadCancelView",
    "WorkloadCloneView",
    "WorkloadDetailView",
    "WorkloadEventsView",
    "WorkloadListView",
    "WorkloadLogsView",
    "WorkloadResumeView",
    "WorkloadSuspendView",
    "WorkloadTrialsView",
    "WorkloadValidateView",
]
