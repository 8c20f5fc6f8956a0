"""Usage pages: overview, team usage, heat map, per-workload charts, idle list, chargeback."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, sees_cluster, teams_visible_to
from apps.budgets.selectors import budget_reports
from apps.common.spreadsheet import SafeWriter
from apps.telemetry import selectors
from apps.telemetry.prom import PrometheusUnavailable, default_client
from apps.web.access import cluster_view
from apps.web.params import query_month, query_slug
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user
from apps.workloads.services import workload_resume

USAGE_DAYS = 30


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _window() -> tuple[date, date]:
    """The last USAGE_DAYS days, today included: [start, end)."""
    today = timezone.now().date()
    return today - timedelta(days=USAGE_DAYS - 1), today + timedelta(days=1)


@login_required
@require_GET
def usage_home(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    start, end = _window()
    series = selectors.usage_series(selectors.user_rows(user), start, end)
    return render(
        request,
        "telemetry/home.html",
        {
            "notices": selectors.open_notices_for(user),
            "chart": series.chart(),
            "totals": selectors.usage_totals(
                selectors.user_rows(user),
                ("gpu_class__name",),
                start,
                end,
            ),
            "teams": teams_visible_to(user, act=Act.SEE_SPEND),
            "sees_cluster": sees_cluster(user),
            "days": USAGE_DAYS,
        },
    )


@login_required
@require_GET
def team_usage(request: HttpRequest, slug: str) -> HttpResponse:
    team = get_object_or_404(teams_visible_to(_user(request), act=Act.SEE_SPEND), slug=slug)
    start, end = _window()
    rows = selectors.team_rows(team)
    return render(
        request,
        "telemetry/team.html",
        {
            "team": team,
            "chart": selectors.usage_series(rows, start, end).chart(),
            "by_user": selectors.usage_totals(
                rows,
                ("owner__username", "gpu_class__name"),
                start,
                end,
            ),
            "days": USAGE_DAYS,
        },
    )


@cluster_view
@require_GET
def heatmap(request: HttpRequest) -> HttpResponse:
    nodes: list[selectors.HeatNode] = []
    error = ""
    try:
        client = default_client()
        try:
            nodes = selectors.heatmap(client, _user(request))
        finally:
            client.close()
    except PrometheusUnavailable as exc:
        error = str(exc)
    return render(request, "telemetry/heatmap.html", {"nodes": nodes, "error": error})


def _visible_workload(request: HttpRequest, workload_id: int) -> Workload:
    try:
        return workload_for_user(_user(request), workload_id)
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None


@login_required
@require_GET
def workload_usage(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _visible_workload(request, workload_id)
    return render(
        request,
        "telemetry/workload.html",
        {
            "workload": workload,
            "usage": selectors.usage_of(workload),
            "notices": workload.idle_notices.all()[:20],
        },
    )


@login_required
@require_GET
def workload_series(request: HttpRequest, workload_id: int) -> JsonResponse:
    workload = _visible_workload(request, workload_id)
    if not settings.PROMETHEUS_URL:
        # Not a passing outage (503 would ask the page to come back): there are no charts.
        return JsonResponse(
            {"error": "Usage charts are off: PROMETHEUS_URL is not set."}, status=404
        )
    try:
        client = default_client()
        try:
            data = selectors.workload_series(client, workload)
        finally:
            client.close()
    except PrometheusUnavailable as exc:
        return JsonResponse({"error": str(exc)}, status=503)
    return JsonResponse(data)


@login_required
@require_POST
def workload_resume_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _visible_workload(request, workload_id)
    try:
        workload_resume(actor=_user(request), workload=workload)
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    else:
        messages.success(
            request, f"{workload.name} is queued again; your files are where you left them."
        )
    return redirect("telemetry:home")


@login_required
@require_GET
def idle_list(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    month_start = timezone.now().replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    sees_spend = platform_may(user, Act.SEE_SPEND)
    return render(
        request,
        "telemetry/idle.html",
        {
            "workloads": selectors.idle_workloads(user)[:200],
            "reclaimed_month": selectors.reclaimed(since=month_start) if sees_spend else None,
            "reclaimed_all": selectors.reclaimed() if sees_spend else None,
            "threshold": settings.TELEMETRY_IDLE_THRESHOLD_PERCENT,
        },
    )


@login_required
@require_GET
def chargeback(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    month, month_error = query_month(request)
    team_slug, team_error = query_slug(request, "team")
    error = " ".join(e for e in (month_error, team_error) if e)
    start, end = selectors.month_bounds(month)
    teams = teams_visible_to(user, act=Act.SEE_SPEND)
    if team_slug:
        teams = teams.filter(slug=team_slug)
    rows = selectors.chargeback(teams, start, end)
    label = f"{start.year:04d}-{start.month:02d}"
    if request.GET.get("format") == "csv" and not error:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="gpupaas-chargeback-{label}.csv"'
        writer = SafeWriter(response)
        writer.writerow(
            [
                "month",
                "team",
                "user",
                "gpu_class",
                "allocated_gpu_hours",
                "used_gpu_hours",
                "cost",
                "currency",
            ]
        )
        for row in rows:
            team, owner, gpu_class = row.parts
            writer.writerow(
                [
                    label,
                    team,
                    owner,
                    gpu_class,
                    f"{row.allocated_hours:.3f}",
                    f"{row.used_hours:.3f}",
                    f"{row.cost:.2f}",
                    settings.PLATFORM_CURRENCY,
                ]
            )
        return response
    total = sum((r.cost for r in rows), start=Decimal(0))
    budgets = budget_reports(list(teams), start)
    return render(
        request,
        "telemetry/chargeback.html",
        {
            "rows": rows,
            "month": label,
            "total": total,
            "teams": teams_visible_to(user, act=Act.SEE_SPEND),
            "team_slug": team_slug or "",
            "error": error,
            "budgets": budgets,
            "currency": settings.PLATFORM_CURRENCY,
        },
        status=400 if error else 200,
    )


def team_of(slug: str) -> Team:
    return get_object_or_404(Team, slug=slug)
