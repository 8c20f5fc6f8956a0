"""The workloads' writes, by concern: ``submit`` (the rule set's check, a request recorded, a
clone), ``lifecycle`` (transitions, the queue, a sweep's state), ``actions`` (cancel, suspend,
resume, delete), ``templates`` (request templates) and ``endpoints`` (an endpoint's recorded
settings and rollouts). Their names are importable from here."""

from apps.workloads.request import dataset_names
from apps.workloads.services.actions import (
    BULK_CANCEL_MAX,
    BulkCancelResult,
    workload_cancel,
    workload_delete,
    workload_resume,
    workload_suspend,
    workload_suspend_idle,
    workload_suspend_unchecked,
    workloads_cancel_many,
)
from apps.workloads.services.endpoints import (
    ROLLOUT_FIELDS,
    endpoint_rollout_observed,
    endpoint_settings,
    endpoint_settings_save,
)
from apps.workloads.services.lifecycle import (
    Transition,
    sweep_state_refresh,
    workload_event_note,
    workload_transition,
    workloads_queue,
    workloads_transition,
)
from apps.workloads.services.submit import (
    CLONED_FIELDS,
    TRIAL_FIELDS,
    workload_clone,
    workload_request_check,
    workload_submit,
)
from apps.workloads.services.templates import request_template_delete, request_template_save

__all__ = [
    "BULK_CANCEL_MAX",
    "CLONED_FIELDS",
    "ROLLOUT_FIELDS",
    "TRIAL_FIELDS",
    "BulkCancelResult",
    "Transition",
    "dataset_names",
    "endpoint_rollout_observed",
    "endpoint_settings",
    "endpoint_settings_save",
    "request_template_delete",
    "request_template_save",
    "sweep_state_refresh",
    "workload_cancel",
    "workload_clone",
    "workload_delete",
    "workload_event_note",
    "workload_request_check",
    "workload_resume",
    "workload_submit",
    "workload_suspend",
    "workload_suspend_idle",
    "workload_suspend_unchecked",
    "workload_transition",
    "workloads_cancel_many",
    "workloads_queue",
    "workloads_transition",
]
