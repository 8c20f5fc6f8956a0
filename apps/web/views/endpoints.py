"""Inference endpoints in the portal: the ingress's auth check, scaling, waking, rollouts and
keys (a new key is shown once, on the page that follows its creation)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.models import User
from apps.catalog.models import Image
from apps.common.http import client_ip
from apps.serving.access import endpoint_call_authorise, endpoint_key_create, endpoint_key_revoke
from apps.serving.models import EndpointKey
from apps.serving.selectors import endpoint_overview
from apps.serving.services import endpoint_scale, endpoint_update, endpoint_wake
from apps.web.forms.workloads import parse_env
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user, workload_may_manage

NEW_KEY_SESSION = "gpupaas-new-endpoint-key"


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _endpoint(request: HttpRequest, workload_id: int) -> Workload:
    try:
        workload = workload_for_user(_user(request), workload_id)
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None
    if workload.kind != core.KIND_INFERENCE:
        raise Http404("Not an inference endpoint.")
    return workload


def _back(workload: Workload) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("workload-detail", args=[workload.pk]) + "#endpoint")


def _errors(request: HttpRequest, exc: ValidationError | PermissionDenied) -> None:
    if isinstance(exc, ValidationError):
        messages.error(request, " ".join(exc.messages))
    else:
        messages.error(request, str(exc))


@csrf_exempt  # asked by the ingress with the call's own method; it changes no user data
@never_cache
def endpoint_auth(request: HttpRequest, workload_id: int) -> HttpResponse:
    """The proxy asks here before every call to an endpoint (auth-url, forwardAuth): 200 for a
    signed-in member of its team or a live key of this endpoint; 401 without either (or with a
    wrong or revoked key, or for an endpoint that does not exist, with the same body); 403 for
    anyone else; 429 with Retry-After after too many wrong keys. A call to an endpoint scaled to
    zero wakes it."""
    user = request.user if request.user.is_authenticated else None
    verdict = endpoint_call_authorise(
        user=user,
        endpoint_id=workload_id,
        authorization=request.headers.get("Authorization", ""),
        api_key=request.headers.get("X-Api-Key", ""),
        source_ip=client_ip(request),
    )
    response = HttpResponse(verdict.message, status=verdict.status, content_type="text/plain")
    response["Cache-Control"] = "no-store"
    if verdict.retry_after:
        response["Retry-After"] = str(verdict.retry_after)
    if verdict.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="gpupaas endpoint"'
    if verdict.waking:
        response["X-Gpupaas-Endpoint"] = "waking"
    return response


@login_required
@require_GET
def endpoint_panel(request: HttpRequest, workload_id: int) -> HttpResponse:
    """The endpoint's live panel on its page (htmx)."""
    workload = _endpoint(request, workload_id)
    return render(request, "workloads/_endpoint.html", endpoint_context(request, workload))


def endpoint_context(request: HttpRequest, workload: Workload) -> dict[str, Any]:
    overview = endpoint_overview(workload)
    samples = overview.samples
    peak = max([s.replicas for s in samples] + [s.target for s in samples] + [1])
    return {
        "workload": workload,
        "endpoint": overview,
        "may_manage": workload_may_manage(_user(request), workload),
        "new_key": request.session.pop(NEW_KEY_SESSION, None),
        "serving_images": Image.objects.filter(enabled=True, kind=Image.Kind.SERVING),
        "chart": [
            {
                "at": s.at,
                "replicas": s.replicas,
                "target": s.target,
                "height": round(10 * s.replicas / peak),  # tenths: a CSS class, no inline style
                "rps": s.requests_per_second,
                "latency_ms": None
                if s.latency_p95_seconds is None
                else round(s.latency_p95_seconds * 1000),
                "gpu": s.gpu_utilisation,
                "decision": s.decision,
            }
            for s in samples
        ],
    }


@login_required
@require_POST
def endpoint_scale_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _endpoint(request, workload_id)
    raw = request.POST.get("replicas", "").strip()
    try:
        replicas: Any = int(raw) if raw.isdigit() else raw
        endpoint_scale(
            actor=_user(request), workload=workload, replicas=replicas, source_ip=client_ip(request)
        )
    except (ValidationError, PermissionDenied) as exc:
        _errors(request, exc)
    else:
        messages.success(request, f"“{workload.name}” asked to run {replicas} replica(s).")
    return _back(workload)


@login_required
@require_POST
def endpoint_wake_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _endpoint(request, workload_id)
    try:
        woke = endpoint_wake(actor=_user(request), workload=workload, source_ip=client_ip(request))
    except PermissionDenied as exc:
        _errors(request, exc)
    else:
        if woke:
            messages.success(request, f"“{workload.name}” is waking up.")
        else:
            messages.error(request, f"“{workload.name}” is {workload.state}, not scaled to zero.")
    return _back(workload)


@login_required
@require_POST
def endpoint_rollout_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _endpoint(request, workload_id)
    image = None
    if request.POST.get("image"):
        image = (
            Image.objects.filter(pk=request.POST["image"][:20]).first()
            if request.POST["image"].isdigit()
            else None
        )
        if image is None:
            messages.error(request, "Pick one of the serving images.")
            return _back(workload)
    try:
        env = parse_env(request.POST.get("env", ""))
        model_path = request.POST.get("model_path", "").strip()
        model_uri = request.POST.get("model_uri", "").strip()
        endpoint_update(
            actor=_user(request),
            workload=workload,
            image=image,
            env=env,
            model_path=model_path if model_path or model_uri else None,
            model_uri=model_uri if model_path or model_uri else None,
            model_secret=request.POST.get("model_secret", "").strip() or None,
            source_ip=client_ip(request),
        )
    except (ValidationError, PermissionDenied) as exc:
        _errors(request, exc)
    else:
        messages.success(request, "Rolling out: new replicas start before old ones stop.")
    return _back(workload)


@login_required
@require_POST
def endpoint_key_create_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _endpoint(request, workload_id)
    try:
        created = endpoint_key_create(
            actor=_user(request),
            workload=workload,
            name=request.POST.get("name", "")[:1000],
            source_ip=client_ip(request),
        )
    except (ValidationError, PermissionDenied) as exc:
        _errors(request, exc)
    else:
        # Shown once, on the next page; never stored anywhere but this session until then.
        request.session[NEW_KEY_SESSION] = {"name": created.key.name, "key": created.plaintext}
    return _back(workload)


@login_required
@require_POST
def endpoint_key_revoke_view(request: HttpRequest, workload_id: int, key_id: int) -> HttpResponse:
    workload = _endpoint(request, workload_id)
    try:
        endpoint_key_revoke(
            actor=_user(request), workload=workload, key_id=key_id, source_ip=client_ip(request)
        )
    except EndpointKey.DoesNotExist:
        raise Http404("No such key.") from None
    except PermissionDenied as exc:
        _errors(request, exc)
    else:
        messages.success(request, "Key revoked: calls with it are refused from now on.")
    return _back(workload)
