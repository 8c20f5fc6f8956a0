"""The portal's home page: the user's workloads and the capacity they may use, with the live
partials that refresh them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from apps.accounts.models import User
from apps.accounts.selectors import memberships_of, platform_roles, teams_of
from apps.quotas.core import format_milli
from apps.web.access import cluster_view
from apps.web.views.workloads.common import _user
from apps.workloads import sizing
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    gpu_class_capacity,
    quota_bars_for_teams,
    waiting_workloads_for_teams,
    workloads_visible_to,
)


def gpu_label(workload: Workload) -> str:
    """What it asks for; a sweep: its trials that run at once, each charged on its own."""
    return sizing.request_label(
        workload.gpu_milli,
        workload.replicas,
        workload.gpu_class.name,
        parallelism=sizing.sweep_parallelism(workload.kind, workload.params),
    )


def _labelled(workloads: Iterable[Workload]) -> list[Workload]:
    rows = list(workloads)
    for w in rows:
        w.gpu_label = gpu_label(w)  # type: ignore[attr-defined]
    return rows


def _dashboard_workloads(user: User) -> dict[str, Any]:
    teams = list(teams_of(user))
    return {
        "workloads": _labelled(
            workloads_visible_to(user).filter(owner=user, sweep__isnull=True)[:50]
        ),
        "waiting": _labelled(waiting_workloads_for_teams(teams)[:50]),
    }


def _dashboard_capacity(user: User) -> dict[str, Any]:
    capacity = [
        {
            "name": c.gpu_class.name,
            "sharing": c.gpu_class.get_sharing_mode_display(),
            "free": format_milli(c.free_milli),
            "total": format_milli(c.capacity_milli),
            "nodes": c.nodes,
        }
        for c in gpu_class_capacity()
    ]
    return {"quota_bars": quota_bars_for_teams(teams_of(user)), "capacity": capacity}


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    memberships = list(memberships_of(user))
    if not memberships and not platform_roles(user):
        return redirect("accounts:no-team")
    context = {
        "memberships": memberships,
        **_dashboard_workloads(user),
        **_dashboard_capacity(user),
    }
    return render(request, "workloads/home.html", context)


@login_required
@require_GET
def dashboard_workloads_partial(request: HttpRequest) -> HttpResponse:
    return render(
        request, "workloads/_dashboard_workloads.html", _dashboard_workloads(_user(request))
    )


@cluster_view
@require_GET
def dashboard_capacity_partial(request: HttpRequest) -> HttpResponse:
    return render(
        request, "workloads/_dashboard_capacity.html", _dashboard_capacity(_user(request))
    )
