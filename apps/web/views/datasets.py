"""The Datasets page of a team: members see what requests may name, leads register and remove."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import User
from apps.accounts.selectors import is_team_lead
from apps.common.http import client_ip
from apps.datasets.models import Dataset
from apps.datasets.selectors import team_dataset, team_datasets
from apps.datasets.services import dataset_register, dataset_remove
from apps.web.access import team_or_404
from apps.web.forms.datasets import DatasetRegisterForm
from apps.web.forms.errors import errors_by_field


@login_required
@require_http_methods(["GET", "POST"])
def team_datasets_page(request: HttpRequest, slug: str) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    team = team_or_404(request, slug)
    form = DatasetRegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            dataset = dataset_register(
                actor=user, team=team, source_ip=client_ip(request), **form.cleaned_data
            )
        except PermissionDenied as exc:
            messages.error(request, str(exc))
            return redirect("team-datasets", slug=team.slug)
        except ValidationError as exc:
            for field, errors in errors_by_field(exc).items():
                form.add_error(field if field in form.fields else None, list(errors))
        else:
            messages.success(request, f"Dataset “{dataset.name}” registered.")
            return redirect("team-datasets", slug=team.slug)
    return render(
        request,
        "datasets/datasets.html",
        {
            "team": team,
            "is_lead": is_team_lead(user, team.pk),
            "datasets": team_datasets(team).select_related("registered_by"),
            "form": form,
        },
        status=400 if request.method == "POST" else 200,
    )


@login_required
@require_POST
def team_dataset_remove(request: HttpRequest, slug: str) -> HttpResponse:
    team = team_or_404(request, slug)
    try:
        dataset = team_dataset(team, request.POST.get("name", ""))
    except Dataset.DoesNotExist:
        raise Http404("No such dataset.") from None
    try:
        dataset_remove(
            actor=request.user,  # type: ignore[arg-type]
            dataset=dataset,
            source_ip=client_ip(request),
        )
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Dataset “{dataset.name}” removed; its data is left alone.")
    return redirect("team-datasets", slug=team.slug)
