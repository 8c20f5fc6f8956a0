from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from apps.accounts.models import User
from apps.accounts.selectors import memberships_of, teams_of
from apps.quotas.selectors import quota_usage_for_teams
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user, workloads_visible_to


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    memberships = list(memberships_of(user))
    if not memberships and not user.is_staff:
        return redirect("accounts:no-team")
    return render(
        request,
        "workloads/home.html",
        {
            "memberships": memberships,
            "usage": quota_usage_for_teams(teams_of(user)),
            "workloads": workloads_visible_to(user).filter(owner=user)[:50],
        },
    )


@login_required
@require_GET
def workload_detail(request: HttpRequest, workload_id: int) -> HttpResponse:
    try:
        workload = workload_for_user(request.user, workload_id)  # type: ignore[arg-type]
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None
    return render(
        request,
        "workloads/detail.html",
        {"workload": workload, "events": workload.events.select_related("actor")},
    )
