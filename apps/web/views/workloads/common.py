"""What the portal's workload views share: the signed-in user, the workload they may see (another
team's is a 404), whether a request came from htmx, and a safe place to go back to."""

from __future__ import annotations

from django.http import (
    Http404,
    HttpRequest,
)
from django.utils.http import url_has_allowed_host_and_scheme

from apps.accounts.models import User
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    workload_for_user,
)


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _workload(request: HttpRequest, workload_id: int) -> Workload:
    try:
        return workload_for_user(_user(request), workload_id)
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None


def _is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _safe_next(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default
