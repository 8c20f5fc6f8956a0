"""The Secrets page of a team: names, scopes, keys and dates; values go in, never out."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import Team, User
from apps.accounts.selectors import is_team_lead
from apps.common.http import client_ip
from apps.credentials.models import Secret
from apps.credentials.selectors import secret_for_user, secrets_usable_by
from apps.orchestration.credentials import secret_create, secret_delete, secret_rotate
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.web.access import team_or_404
from apps.web.forms.credentials import SecretCreateForm, SecretValueForm
from apps.web.forms.errors import errors_by_field


def _secret(request: HttpRequest, team: Team) -> Secret:
    try:
        return secret_for_user(
            request.user,  # type: ignore[arg-type]
            team,
            request.POST.get("name", ""),
            scope=request.POST.get("scope", ""),
        )
    except Secret.DoesNotExist:
        raise Http404("No such secret.") from None


@login_required
@require_http_methods(["GET", "POST"])
def team_secrets(request: HttpRequest, slug: str) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    team = team_or_404(request, slug)
    form = SecretCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            secret = secret_create(
                actor=user,
                team=team,
                name=form.cleaned_data["name"],
                data=form.data_value(),
                personal=form.cleaned_data["personal"],
                source_ip=client_ip(request),
            )
        except PermissionDenied as exc:
            form.add_error("personal", str(exc))
        except ValidationError as exc:
            # By field (a bad name or value), or one message for the whole form (no cluster
            # is registered to keep the secret in).
            for field, errors in errors_by_field(exc).items():
                form.add_error(field if field in form.fields else None, list(errors))
        except ClusterError as exc:
            form.add_error(None, f"Not saved: {cluster_error_answer(exc).message}")
        else:
            messages.success(request, f"Secret “{secret.name}” saved; its value is not shown.")
            return redirect("team-secrets", slug=team.slug)
    return render(
        request,
        "credentials/secrets.html",
        {
            "team": team,
            "is_lead": is_team_lead(user, team.pk),
            "secrets": secrets_usable_by(user, team).select_related("created_by"),
            "form": form,
            "rotate_form": SecretValueForm(auto_id="rotate_%s"),
        },
        status=400 if request.method == "POST" else 200,
    )


@login_required
@require_POST
def team_secret_rotate(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug)
    secret = _secret(request, team)
    form = SecretValueForm(request.POST)
    try:
        if not form.is_valid():
            raise ValidationError(" ".join(str(e) for errs in form.errors.values() for e in errs))
        secret_rotate(
            actor=request.user,  # type: ignore[arg-type]
            secret=secret,
            data=form.data_value(),
            source_ip=client_ip(request),
        )
    except (PermissionDenied, ValidationError) as exc:
        text = " ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
        messages.error(request, f"Could not rotate {secret.name}: {text}")
    except ClusterError as exc:
        messages.error(request, f"Not saved: {cluster_error_answer(exc).message}")
    else:
        messages.success(request, f"Secret “{secret.name}” rotated; new workloads see it.")
    return redirect("team-secrets", slug=team.slug)


@login_required
@require_POST
def team_secret_delete(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug)
    secret = _secret(request, team)
    try:
        secret_delete(
            actor=request.user,  # type: ignore[arg-type]
            secret=secret,
            source_ip=client_ip(request),
        )
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Secret “{secret.name}” deleted.")
    return redirect("team-secrets", slug=team.slug)
