"""A workload's actions in the portal: cancel, suspend and resume (the services decide who may)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.common.http import client_ip
from apps.web.views.workloads.common import _safe_next, _user, _workload
from apps.workloads.services import (
    workload_cancel,
    workload_resume,
    workload_suspend,
)


def _action(
    request: HttpRequest, workload_id: int, service: Any, done: str
) -> HttpResponseRedirect:
    workload = _workload(request, workload_id)
    target = _safe_next(request, reverse("workload-detail", args=[workload.pk]))
    try:
        # A refusal (PermissionDenied) is the portal's 403 page, with the reason and whom to ask.
        service(actor=_user(request), workload=workload, source_ip=client_ip(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, done.format(name=workload.name))
    return HttpResponseRedirect(target)


@login_required
@require_POST
def workload_cancel_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(request, workload_id, workload_cancel, "“{name}” cancelled.")


@login_required
@require_POST
def workload_suspend_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(
        request, workload_id, workload_suspend, "“{name}” suspended; its files are kept."
    )


@login_required
@require_POST
def workload_resume_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(request, workload_id, workload_resume, "“{name}” queued again.")
