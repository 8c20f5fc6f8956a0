"""A user's request templates in the portal: listed and deleted (saved from the request form)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.web.params import path_int
from apps.web.views.workloads.common import _user
from apps.workloads.models import RequestTemplate
from apps.workloads.selectors import (
    request_template_for_user,
    request_templates_for,
)
from apps.workloads.services import (
    request_template_delete,
)


def _template(request: HttpRequest, template_id: Any) -> RequestTemplate:
    number = path_int(template_id)
    try:
        if number is not None:
            return request_template_for_user(_user(request), number)
    except RequestTemplate.DoesNotExist:
        pass
    raise Http404("No such template.")


@login_required
@require_GET
def template_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "workloads/templates.html",
        {"templates": request_templates_for(_user(request)), "user_id": request.user.pk},
    )


@login_required
@require_POST
def template_delete(request: HttpRequest, template_id: int) -> HttpResponse:
    template = _template(request, template_id)
    try:
        request_template_delete(actor=_user(request), template=template)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Template “{template.name}” deleted.")
    return HttpResponseRedirect(reverse("template-list"))
