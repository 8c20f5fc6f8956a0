from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import core
from apps.accounts.models import ApiToken, Team, User
from apps.accounts.oidc import configured_providers, logout_url, provider_of_session
from apps.accounts.roles import Act
from apps.accounts.selectors import (
    is_team_lead,
    memberships_of,
    platform_may,
    platform_roles,
    teams_of,
    token_for_user,
    tokens_of,
)
from apps.accounts.services import api_token_create, api_token_revoke
from apps.audit.services import audit_record
from apps.common.http import client_ip
from apps.web.forms.accounts import ApiTokenForm
from apps.web.forms.errors import errors_by_field
from apps.web.forms.workloads import TeamWorkloadFilterForm
from apps.workloads.selectors import quota_bars_for_teams, team_workloads
from apps.workloads.sizing import request_label, sweep_parallelism


def dev_login_allowed() -> bool:
    """Demo sign-in needs DEBUG on and OIDC off, checked at request time, every time."""
    return bool(settings.DEBUG and settings.DEV_LOGIN_ENABLED and not settings.OIDC_ENABLED)


@require_GET
def login_page(request: HttpRequest) -> HttpResponse:
    next_path = core.safe_next_path(request.GET.get("next")) or ""
    if request.user.is_authenticated:
        return HttpResponseRedirect(next_path or "/")
    demo_users = []
    if dev_login_allowed():
        demo_users = list(
            User.objects.filter(username__in=settings.DEV_LOGIN_USERS, is_active=True).order_by(
                "username"
            )
        )
    return render(
        request,
        "accounts/login.html",
        {
            "next": next_path,
            "oidc_enabled": settings.OIDC_ENABLED,
            "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
            "oidc_providers": configured_providers(),
            "dev_login": dev_login_allowed(),
            "demo_users": demo_users,
        },
    )


@require_POST
def dev_login(request: HttpRequest) -> HttpResponse:
    """Local sign-in as a seeded demo user. Exists only with DEBUG on and OIDC off.

    The check runs at request time too, so a settings override or a stale URLconf can never
    expose it on a production-like configuration.
    """
    if not dev_login_allowed():
        raise Http404("Development sign-in is disabled.")
    username = request.POST.get("username", "")
    if username not in settings.DEV_LOGIN_USERS:
        raise Http404("Not a demo user.")
    user = User.objects.filter(username=username, is_active=True).first()
    if user is None:
        raise Http404("Not a demo user.")
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    audit_record(actor=user, action="auth.dev_login", obj=user, source_ip=client_ip(request))
    return HttpResponseRedirect(core.safe_next_path(request.POST.get("next")) or "/")


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    user = request.user
    if isinstance(user, User):
        audit_record(actor=user, action="auth.logout", obj=user, source_ip=client_ip(request))
    id_token = str(request.session.get("oidc_id_token") or "")
    # The provider this session signed in with: its end-session endpoint, its client.
    provider = provider_of_session(request) if settings.OIDC_ENABLED else None
    logout(request)
    op_logout = (
        logout_url(id_token=id_token, return_to=request.build_absolute_uri("/"), provider=provider)
        if provider is not None
        else ""
    )
    if op_logout:
        return render(request, "accounts/logged_out.html", {"op_logout": op_logout})
    return redirect("accounts:login")


@login_required
@require_GET
def no_team(request: HttpRequest) -> HttpResponse:
    if platform_roles(request.user) or memberships_of(request.user).exists():  # type: ignore[arg-type]
        return redirect("home")
    return render(
        request,
        "accounts/no_team.html",
        {"contact": settings.PLATFORM_CONTACT, "groups": _last_groups(request.user)},  # type: ignore[arg-type]
    )


def _last_groups(user: User) -> list[str]:
    identity = user.oidc_identities.order_by("-last_login_at").first()
    return list(identity.last_groups) if identity else []


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    created_plaintext = None
    created_token: ApiToken | None = None
    form = ApiTokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            created_token, created_plaintext = api_token_create(
                actor=user,
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(),
                source_ip=client_ip(request),
            )
        except ValidationError as exc:
            for field, errs in errors_by_field(exc).items():
                name = "expiry" if field == "expires_at" else field
                form.add_error(name if name in form.fields else None, list(errs))
        else:
            form = ApiTokenForm()
    response = render(
        request,
        "accounts/tokens.html",
        {
            "form": form,
            "tokens": tokens_of(user),
            "created_plaintext": created_plaintext,
            "created_token": created_token,
        },
        status=400 if request.method == "POST" and form.errors else 200,
    )
    # The one page that shows a secret must never be cached.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    try:
        token = token_for_user(user, token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None
    api_token_revoke(actor=user, token=token, source_ip=client_ip(request))
    messages.success(request, f"Token “{token.name}” revoked. Clients using it now get 401.")
    return HttpResponseRedirect(reverse("accounts:tokens"))


# --- profile and team pages ---------------------------------------------------------------


@login_required
@require_GET
def profile(request: HttpRequest) -> HttpResponse:
    """Who you are to gpupaas. Name, e-mail and teams come from the identity provider."""
    user: User = request.user  # type: ignore[assignment]
    return render(
        request,
        "accounts/profile.html",
        {
            "memberships": memberships_of(user),
            "identities": user.oidc_identities.order_by("issuer"),
            "groups": _last_groups(user),
            "active_tokens": sum(1 for t in tokens_of(user) if t.is_active()),
            "oidc_enabled": settings.OIDC_ENABLED,
            "contact": settings.PLATFORM_CONTACT,
        },
    )


# Rows of the team page's workload table per page (newest first; older ones a page on).
TEAM_WORKLOADS_PER_PAGE = 50


@login_required
@require_GET
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """Members and roles, quotas and usage, and the team's workloads with filters.

    Members see it read-only; leads and admins may cancel the team's workloads from it;
    anyone else gets 404, whatever the slug.
    """
    user: User = request.user  # type: ignore[assignment]
    teams = Team.objects.all() if platform_may(user, Act.SEE_TEAMS) else teams_of(user)
    team = teams.filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    is_lead = is_team_lead(user, team.pk)
    filter_form = TeamWorkloadFilterForm(request.GET or None, team=team)
    listed = team_workloads(team, **filter_form.filters()).order_by("-created_at", "-id")
    page = Paginator(listed, TEAM_WORKLOADS_PER_PAGE).get_page(request.GET.get("page"))
    workloads = list(page)
    for w in workloads:
        w.gpu_label = request_label(  # type: ignore[attr-defined]
            w.gpu_milli,
            w.replicas,
            w.gpu_class.name,
            parallelism=sweep_parallelism(w.kind, w.params),
        )
    return render(
        request,
        "accounts/team.html",
        {
            "team": team,
            "is_lead": is_lead,
            "members": team.memberships.select_related("user").order_by("-role", "user__username"),
            "quota_bars": quota_bars_for_teams([team]),
            "filter_form": filter_form,
            "workloads": workloads,
            "page": page,
            "next": request.get_full_path(),
        },
    )
