"""Submitting from one mapping: tests build a request's fields and the service's arguments
together (a helper's defaults, updated by each test's own) and submit them through here."""

from __future__ import annotations

from typing import Any

from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit

SERVICE_ARGUMENTS = frozenset({"actor", "team", "gpu_class", "image", "source_ip", "before_create"})


def submit_fields(**fields: Any) -> Workload:
    """``workload_submit`` with the service's arguments taken out of ``fields``; the rest is
    the request (:meth:`WorkloadRequest.of`)."""
    service = {name: fields.pop(name) for name in SERVICE_ARGUMENTS & fields.keys()}
    return workload_submit(**service, request=WorkloadRequest.of(**fields))
