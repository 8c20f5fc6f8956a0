"""The platform overview for admins and leads, in GPUs, and the quota editing it offers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may
from apps.budgets.core import month_label
from apps.budgets.selectors import budget_report, budget_reports, this_month
from apps.budgets.services import budget_set, budget_stop_lift
from apps.catalog.models import GpuClass
from apps.common.http import client_ip
from apps.policies import core as policy_core
from apps.policies.selectors import policy_summaries, team_policy_spec
from apps.policies.services import team_policy_set
from apps.quotas.core import format_milli
from apps.quotas.services import team_quota_set
from apps.telemetry.selectors import overview, rightsizing
from apps.telemetry.services.rightsizing import advice_apply
from apps.web.access import team_or_404
from apps.web.forms.errors import errors_by_field
from apps.web.forms.governance import (
    AdviceApplyForm,
    AdviceForm,
    BudgetForm,
    PolicyForm,
    QuotaForm,
    policy_initial,
)

# Pages of other governance features the overview links to when they are installed: (label,
# URL name). A name that does not resolve is left out.
OVERVIEW_LINKS = (
    ("Quota requests", "quota-requests"),
    ("Reservations", "reservations"),
)
NOT_FOR_YOU = "The overview is for team leads and platform admins."


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _links() -> list[tuple[str, str]]:
    links = []
    for label, name in OVERVIEW_LINKS:
        try:
            links.append((label, reverse(name)))
        except NoReverseMatch:
            continue
    return links


def _overview_context(user: User, quota_form: QuotaForm | None = None) -> dict[str, object]:
    teams = list(overview.overview_teams(user))
    start, end = overview.week_bounds()
    busiest, idlest = overview.busiest_and_idlest(teams)
    allocation = overview.allocation(teams, start, end)
    budgets = {r.team.pk: r for r in budget_reports(teams)}
    policies = policy_summaries(teams)
    return {
        "teams": teams,
        "allocation": allocation,
        "capacity": overview.capacity_by_class() if platform_may(user, Act.SEE_CAPACITY) else [],
        "borrowing": overview.borrowing(teams),
        "queue": overview.queue(teams),
        "idle_cost": overview.idle_cost(teams, start, end),
        "busiest": busiest,
        "idlest": idlest,
        "week_start": start,
        "currency": settings.PLATFORM_CURRENCY,
        "quota_form": quota_form if quota_form is not None else QuotaForm(),
        "governance": [(team, budgets.get(team.pk), policies.get(team.pk)) for team in teams],
        "may_edit_quotas": platform_may(user, Act.GOVERN_TEAMS),
        "links": _links(),
    }


@login_required
@require_GET
def overview_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    if not overview.may_see_overview(user):
        return render(request, "governance/forbidden.html", {"message": NOT_FOR_YOU}, status=403)
    return render(request, "governance/overview.html", _overview_context(user))


@login_required
@require_POST
def quota_edit(request: HttpRequest) -> HttpResponse:
    """A platform admin sets a team's quota of a class in GPUs (audited by the service)."""
    user = _user(request)
    if not platform_may(user, Act.GOVERN_TEAMS):
        return render(
            request,
            "governance/forbidden.html",
            {"message": "Only platform admins change quotas."},
            status=403,
        )
    form = QuotaForm(request.POST)
    if form.is_valid():
        values = form.values()
        try:
            result = team_quota_set(actor=user, source_ip=client_ip(request), **values)
        except ValidationError as exc:
            for field, errors in errors_by_field(exc).items():
                name = field.removesuffix("_milli")
                form.add_error(name if name in form.fields else None, ValidationError(errors))
        else:
            messages.success(
                request,
                f"{values['team'].name} on {values['gpu_class'].name}: "
                f"{form.cleaned_data['guaranteed'].normalize():f} GPU guaranteed, "
                f"limit {form.cleaned_data['limit'].normalize():f} GPU.",
            )
            if result.warning:
                messages.warning(request, result.warning)
            return redirect("governance-overview")
    return render(request, "governance/overview.html", _overview_context(user, form), status=400)


# --- a team's budget ---------------------------------------------------------------------------


def _budget_context(
    request: HttpRequest, team: Team, form: BudgetForm | None = None
) -> dict[str, object]:
    user = _user(request)
    report = budget_report(team)
    if form is None:
        initial: dict[str, object] = {"month": month_label(this_month())}
        if report is not None:
            state = report.state
            initial.update(
                amount=state.amount,
                thresholds=", ".join(str(t) for t in state.thresholds),
                hard_stop=state.hard_stop,
            )
        form = BudgetForm(initial=initial)
    return {
        "team": team,
        "report": report,
        "currency": settings.PLATFORM_CURRENCY,
        "form": form,
        "may_set": platform_may(user, Act.MANAGE_BILLING),
        "may_approve": is_team_lead(user, team.pk),
    }


@login_required
@require_GET
def team_budget(request: HttpRequest, slug: str) -> HttpResponse:
    """The team's budget this month: spent, run rate, forecast, thresholds and the hard stop.
    Members see it; admins set it; leads approve more work under the hard stop."""
    team = team_or_404(request, slug, act=Act.SEE_SPEND)
    return render(request, "governance/budget.html", _budget_context(request, team))


@login_required
@require_POST
def team_budget_set(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug, act=Act.SEE_SPEND)
    user = _user(request)
    form = BudgetForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            budget_set(
                actor=user,
                team=team,
                month=data["month"],
                amount=data["amount"],
                thresholds=data["thresholds"],
                hard_stop=data["hard_stop"],
                source_ip=client_ip(request),
            )
        except PermissionDenied as exc:
            return render(request, "governance/forbidden.html", {"message": str(exc)}, status=403)
        except ValidationError as exc:
            for field, errors in errors_by_field(exc).items():
                form.add_error(field if field in form.fields else None, ValidationError(errors))
        else:
            messages.success(request, f"Budget of {team.name} saved.")
            return redirect("team-budget", team.slug)
    context = _budget_context(request, team, form)
    return render(request, "governance/budget.html", context, status=400)


@login_required
@require_POST
def team_budget_approve(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug, act=Act.SEE_SPEND)
    try:
        budget_stop_lift(
            actor=_user(request), team=team, month=this_month(), source_ip=client_ip(request)
        )
    except PermissionDenied as exc:
        return render(request, "governance/forbidden.html", {"message": str(exc)}, status=403)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(
            request, f"Approved: {team.name}'s members may start new work again this month."
        )
    return redirect("team-budget", team.slug)


# --- right-sizing advice -----------------------------------------------------------------------


def _days(data: Any) -> tuple[int, str]:
    form = AdviceForm(data)
    if not form.is_valid():
        return (
            rightsizing.DEFAULT_DAYS,
            f"The window is a whole number of days from 1 to {rightsizing.MAX_DAYS}.",
        )
    return form.cleaned_data["days"] or rightsizing.DEFAULT_DAYS, ""


@login_required
@require_GET
def advice_page(request: HttpRequest) -> HttpResponse:
    """Suggested guarantees and limits per team and class, with the evidence (admins)."""
    if not platform_may(_user(request), Act.SEE_TEAMS):
        return render(
            request,
            "governance/forbidden.html",
            {"message": "Right-sizing advice is for platform admins."},
            status=403,
        )
    days, error = _days(request.GET)
    return render(
        request,
        "governance/advice.html",
        {"rows": rightsizing.rightsizing(days=days), "days": days, "error": error},
        status=400 if error else 200,
    )


@login_required
@require_POST
def advice_apply_view(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    days, error = _days(request.POST)
    form = AdviceApplyForm(request.POST)
    team = gpu_class = None
    if form.is_valid():
        team = Team.objects.filter(slug=form.cleaned_data["team"]).first()
        gpu_class = GpuClass.objects.filter(name=form.cleaned_data["gpu_class"]).first()
    if not platform_may(user, Act.GOVERN_TEAMS):
        return render(
            request,
            "governance/forbidden.html",
            {"message": "Only platform admins apply right-sizing advice."},
            status=403,
        )
    if error or team is None or gpu_class is None:
        messages.error(request, error or "No such team or GPU class.")
        return redirect(f"{reverse('governance-advice')}?days={days}")
    try:
        result = advice_apply(
            actor=user, team=team, gpu_class=gpu_class, days=days, source_ip=client_ip(request)
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        q = result.quota
        messages.success(
            request,
            f"{team.name} on {gpu_class.name}: {format_milli(q.guaranteed_milli)} GPU "
            f"guaranteed, limit {format_milli(q.limit_milli)} GPU.",
        )
        if result.warning:
            messages.warning(request, result.warning)
    return redirect(f"{reverse('governance-advice')}?days={days}")


# --- a team's policy ---------------------------------------------------------------------------


def _policy_context(team: Team, user: User, form: PolicyForm | None = None) -> dict[str, object]:
    spec = team_policy_spec(team)
    return {
        "team": team,
        "summary": policy_core.summary(spec) if spec else [],
        "form": form or PolicyForm(initial=policy_initial(spec) if spec else None),
        "may_set": platform_may(user, Act.GOVERN_TEAMS),
    }


@login_required
@require_GET
def team_policy(request: HttpRequest, slug: str) -> HttpResponse:
    """What the team may ask for beyond its quota: members see it, platform admins set it."""
    team = team_or_404(request, slug)
    return render(request, "governance/policy.html", _policy_context(team, _user(request)))


@login_required
@require_POST
def team_policy_set_view(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug)
    user = _user(request)
    if not platform_may(user, Act.GOVERN_TEAMS):
        return render(
            request,
            "governance/forbidden.html",
            {"message": "Only platform admins set team policies."},
            status=403,
        )
    form = PolicyForm(request.POST)
    if form.is_valid():
        try:
            team_policy_set(actor=user, team=team, source_ip=client_ip(request), **form.values())
        except ValidationError as exc:
            form.add_error(None, ValidationError(exc.messages))
        else:
            messages.success(request, f"Policy of {team.name} saved.")
            return redirect("team-policy", team.slug)
    return render(request, "governance/policy.html", _policy_context(team, user, form), status=400)
