"""A workload's page in the portal: its request, placement, status and events (live partials)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.orchestration.cluster_reads import (
    LogsUnavailable,
)
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.selectors import (
    endpoint_replicas_seen,
    gpu_class_spec,
    sweep_trials,
    workload_cluster_events,
)
from apps.web.views.endpoints import endpoint_context
from apps.web.views.workloads.common import _user, _workload
from apps.web.views.workloads.dashboard import gpu_label
from apps.workloads import core, sizing
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    workload_may_manage,
    workload_may_open,
)


def duration_label(seconds: int | None) -> str:
    """3600 → "1 h", 5400 → "1 h 30 min", 600 → "10 min"."""
    if not seconds:
        return ""
    hours, rest = divmod(int(seconds), 3600)
    minutes = rest // 60
    parts = [f"{hours} h"] if hours else []
    if minutes or not parts:
        parts.append(f"{minutes} min")
    return " ".join(parts)


def placement_rows(placement: Any) -> list[dict[str, str]]:
    """The scheduler's placement JSON as one row per replica: node and GPUs in words."""
    replicas = placement.get("replicas") if isinstance(placement, dict) else None
    rows = []
    for entry in replicas or []:
        if not isinstance(entry, dict) or not entry.get("node"):
            continue
        gpus = ", ".join(f"GPU {g}" for g in entry.get("gpus") or [])
        if entry.get("mig_profile"):
            gpus = f"{gpus} · MIG {entry['mig_profile']}".strip(" ·")
        rows.append({"node": str(entry["node"]), "gpus": gpus or "—"})
    return rows


def endpoint_replica_rows(workload: Workload) -> tuple[list[dict[str, str]], str, bool]:
    """An endpoint's replicas as the cluster runs them (its replicas are not pinned: the node a
    pod is bound to is the truth, not the one placed for it), and a line saying how many of
    those asked run; the placement as stored, and why, when the cluster cannot be read."""
    try:
        seen = endpoint_replicas_seen(workload)
    except (LogsUnavailable, ClusterError) as exc:
        words = str(exc) if isinstance(exc, LogsUnavailable) else cluster_error_answer(exc).message
        note = f"As placed (the cluster was not read: {words})"
        return placement_rows(workload.placement), note, False
    rows = [{"node": r.node or "—", "gpus": r.state} for r in seen]
    running = sum(1 for r in seen if r.state == "running")
    return rows, f"{running} of {workload.replicas} replicas running, as the cluster says", True


def _status_context(request: HttpRequest, workload: Workload) -> dict[str, Any]:
    user = _user(request)
    placement, placement_note, seen = placement_rows(workload.placement), "", False
    if workload.kind == core.KIND_INFERENCE and workload.state in core.ACTIVE_STATES:
        placement, placement_note, seen = endpoint_replica_rows(workload)
    return {
        "workload": workload,
        "events": workload.events.select_related("actor"),
        "may_manage": workload_may_manage(user, workload),
        "may_open": workload_may_open(user, workload),
        "gpu_label": gpu_label(workload),
        "gpu_description": sizing.describe_amount(
            workload.gpu_milli, gpu_class_spec(workload.gpu_class)
        ),
        "placement": placement,
        "placement_note": placement_note,
        "placement_seen": seen,  # rows from the cluster's pods: node and state
        "max_runtime": duration_label(workload.max_runtime_seconds),
        "idle_timeout": duration_label(workload.idle_timeout_seconds),
        "waiting": workload.state in core.WAITING_STATES | {core.PREEMPTED},
        "live": not workload.is_terminal,
    }


@login_required
@require_GET
def workload_detail(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    context = _status_context(request, workload)
    if workload.is_sweep:
        context["trials"] = sweep_trials(workload)
        context["parallelism"] = (workload.params or {}).get("parallelism")
    if workload.kind == core.KIND_INFERENCE:
        context.update(endpoint_context(request, workload))
    return render(request, "workloads/detail.html", context)


@login_required
@require_GET
def workload_status_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    return render(request, "workloads/_status.html", _status_context(request, workload))


@login_required
@require_GET
def workload_events_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    archived, note = False, ""
    try:
        found = workload_cluster_events(workload=workload)
        events, archived, note, problem = found.events, found.archived, found.note, None
    except LogsUnavailable as exc:
        events, problem = [], str(exc)
    except ClusterError as exc:
        # The API's words for the same error; the partial answers 200 so that htmx shows it.
        events, problem = [], cluster_error_answer(exc).message
    return render(
        request,
        "workloads/_events.html",
        {
            "workload": workload,
            "cluster_events": events,
            "problem": problem,
            "archived": archived,
            "note": note,
        },
    )
