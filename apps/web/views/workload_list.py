"""Every workload the caller may see: search, filters, sort, pages, bulk cancel."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_ids_led_by, teams_visible_to
from apps.common.http import client_ip
from apps.web.forms.workloads import WorkloadListForm
from apps.web.params import path_int
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import WorkloadFilters, WorkloadListing
from apps.workloads.services import BULK_CANCEL_MAX, workloads_cancel_many
from apps.workloads.sizing import request_label, sweep_parallelism

PAGE_SIZE = 50
COLUMNS = (
    "id",
    "name",
    "kind",
    "state",
    "team__name",
    "owner_id",
    "owner__username",
    "gpu_class__name",
    "image__name",
    "gpu_milli",
    "replicas",
    "created_at",
    "team_id",
    # A sweep's cap is in its params: what it holds at once.
    "params",
)


@login_required
@require_GET
def workload_list(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    form = WorkloadListForm(request.GET or None, teams=teams_visible_to(user))
    filters = form.filters() if form.is_bound and form.is_valid() else WorkloadFilters()
    listing = WorkloadListing(user, filters, COLUMNS)
    paginator: Paginator[dict[str, Any]] = Paginator(listing, PAGE_SIZE)  # type: ignore[arg-type]
    page = paginator.get_page(request.GET.get("page"))
    led = team_ids_led_by(user)
    acts_for_teams = platform_may(user, Act.ACT_FOR_TEAMS)
    rows = []
    for row in page.object_list:
        terminal = row["state"] in core.TERMINAL_STATES
        rows.append(
            {
                **row,
                "terminal": terminal,
                "gpu_label": request_label(
                    row["gpu_milli"],
                    row["replicas"],
                    row["gpu_class__name"],
                    parallelism=sweep_parallelism(row["kind"], row["params"]),
                ),
                "may_cancel": not terminal
                and (acts_for_teams or row["owner_id"] == user.pk or row["team_id"] in led),
                "state_label": core_state_label(row["state"]),
                "kind_label": core_kind_label(row["kind"]),
            }
        )
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "workloads/list.html",
        {
            "form": form,
            "page": page,
            "rows": rows,
            "query": query.urlencode(),
            "bulk_max": BULK_CANCEL_MAX,
        },
        status=400 if form.is_bound and form.errors else 200,
    )


def core_state_label(state: str) -> str:
    return str(Workload.State(state).label) if state in Workload.State.values else state


def core_kind_label(kind: str) -> str:
    return str(Workload.Kind(kind).label) if kind in Workload.Kind.values else kind


@login_required
@require_POST
def workload_bulk_cancel(request: HttpRequest) -> HttpResponse:
    """Cancel the ticked workloads, each through the one cancel (its checks and audit)."""
    user: User = request.user  # type: ignore[assignment]
    ids = [i for i in (path_int(v) for v in request.POST.getlist("ids")) if i is not None]
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts=None) or not back.startswith("/"):
        back = reverse("workload-list")
    if not ids:
        messages.error(request, "Tick the workloads to cancel first.")
        return HttpResponseRedirect(back)
    if len(ids) > BULK_CANCEL_MAX:
        messages.error(request, f"Cancel at most {BULK_CANCEL_MAX} workloads at once.")
        return HttpResponseRedirect(back)
    result = workloads_cancel_many(actor=user, ids=ids, source_ip=client_ip(request))
    if result.cancelled:
        messages.success(
            request, f"Cancelled {len(result.cancelled)}: {', '.join(result.cancelled)}."
        )
    for line in result.refused:
        messages.error(request, f"Not cancelled — {line}")
    if not result.cancelled and not result.refused:
        messages.error(request, "None of those workloads can be found.")
    return HttpResponseRedirect(back)
