"""Opening a notebook through the portal: the "Open" button, the sign-in the ingress sends
people to, and the check the ingress asks for on every request to a notebook.

How it fits together is told in ``apps.orchestration.notebook_access``. The Jupyter token is
never put in a URL or a page: only the auth endpoint's ``Authorization`` header carries it,
and ingress-nginx hands that to Jupyter, not to the browser.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from apps.accounts.models import User
from apps.orchestration import notebook_access as access
from apps.orchestration.cluster_reads import (
    NotebookUnavailable,
    notebook_path,
    notebook_token,
    notebook_token_for_ingress,
)
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.manifests.routes import UNKNOWN_ID
from apps.orchestration.names import stored_name
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


def _enter(request: HttpRequest, workload: Workload, *, target: str = "") -> HttpResponse:
    """Send an owner or admin into the notebook with a one-time ticket, or explain why not."""
    if workload.kind != core.KIND_NOTEBOOK:
        raise Http404("Only notebooks can be opened.")
    if not access.may_open(_user(request), workload):
        raise PermissionDenied("Only the notebook's owner and platform admins may open it.")
    path = notebook_path(workload)
    location = None
    problem = None
    status = 200
    if workload.state != core.RUNNING:
        problem = f"The notebook is {workload.get_state_display().lower()}, not running."
    elif not access.exposed():
        problem = (
            "Notebooks are not published through an ingress here (NOTEBOOK_HOST and "
            "NOTEBOOK_WILDCARD_HOST are empty); reach it with kubectl as shown below."
        )
    else:
        try:
            # Only to know that it can be served: the token itself stays on the server.
            notebook_token(workload)
        except NotebookUnavailable as exc:
            problem = str(exc)
        except ClusterError as exc:
            status, problem = cluster_error_answer(exc)
        else:
            location = access.notebook_location(workload)
        if problem is None and location is None:
            problem = "The notebook is still starting; try again in a moment."
        elif problem is None and location is not None:
            ticket = access.ticket_mint(user=_user(request), workload=workload)
            deep = target.startswith(location.path) and ".." not in target
            where = target if deep else location.path
            url = f"{location.scheme}://{location.host}{where}?"
            return _no_store(HttpResponseRedirect(url + urlencode({access.TICKET_PARAM: ticket})))
    namespace = workload.team.namespace
    context = {
        "workload": workload,
        "path": path,
        "problem": problem,
        "port_forward": not access.exposed(),
        "namespace": namespace,
        # As stored when they were created (empty before: the notebook is not running).
        "service": stored_name(workload, "Service"),
        "token_secret": stored_name(workload, "Secret"),
    }
    return _no_store(render(request, "workloads/open.html", context, status=status))


@login_required
@require_GET
def workload_open(request: HttpRequest, workload_id: int) -> HttpResponse:
    """Open a notebook. Owner and admins only: teammates see the notebook's page but get 403
    here, outsiders 404."""
    try:
        workload = workload_for_user(_user(request), workload_id)
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None
    return _enter(request, workload)


@login_required
@require_GET
def notebook_signin(request: HttpRequest) -> HttpResponse:
    """Where the ingress sends a browser without access (auth-signin, with ``rd``: the URL it
    asked for). Signed in here, the owner or an admin goes back in with a fresh ticket."""
    found = access.notebook_for_url(request.GET.get("rd", ""))
    if found is None:
        raise Http404("No such notebook.")
    try:
        workload = workload_for_user(_user(request), found[0].pk)
    except Workload.DoesNotExist:
        raise Http404("No such notebook.") from None
    return _enter(request, workload, target=urlsplit(request.GET.get("rd", "")).path)


def _original_url(request: HttpRequest) -> str:
    """The URL the ingress is asking about: ingress-nginx sends X-Original-URL; other proxies
    send the host and the URI apart."""
    if url := request.headers.get("X-Original-URL", ""):
        return url
    host = request.headers.get("X-Original-Host") or request.headers.get("X-Forwarded-Host", "")
    uri = request.headers.get("X-Original-URI") or request.headers.get("X-Forwarded-Uri", "")
    proto = request.headers.get("X-Forwarded-Proto", "https")
    return f"{proto}://{host}{uri}" if host and uri else ""


_REFUSALS = {
    401: "Open this notebook from its page in the portal.",
    403: "This notebook opens for its owner and platform admins only.",
}


def _refuse(status: int) -> HttpResponse:
    """The answer the gateway passes on to the browser as it is: a short reason in words (a
    browser shows an empty error answer as its own failure page)."""
    reason = _REFUSALS.get(status, "The notebook cannot be reached right now; try again soon.")
    return _no_store(HttpResponse(reason + "\n", status=status, content_type="text/plain"))


@csrf_exempt  # it changes nothing but its own cookie, and is asked with the request's method
@never_cache
def notebook_auth(request: HttpRequest) -> HttpResponse:
    """ingress-nginx asks here before every request to a notebook (auth-url).

    200 with ``Authorization: token …`` for the owner and admins of a running notebook; 401
    (the ingress sends the browser to the sign-in) without a valid ticket, cookie or session,
    or while the notebook is not running; 403 for anyone else who is signed in.
    """
    return _notebook_auth(request, _original_url(request), route_id=None)


@csrf_exempt  # it changes nothing but its own cookie, and is asked with the request's method
@never_cache
def notebook_route_auth(
    request: HttpRequest, workload_id: int, forwarded: str = ""
) -> HttpResponse:
    """A gateway's route asks here before every request to notebook ``workload_id`` (Traefik's
    forwardAuth, or Gateway API's ExternalAuth filter with the request's path after this one).

    The answer is about the notebook the route serves: a forwarded URL that names another
    notebook (a path the gateway normalised differently) is refused 403. As ``notebook_auth``
    otherwise, except that a browser without access is sent to the sign-in (302) here, as a
    gateway answers with the portal's own answer.
    """
    original = _original_url(request)
    if forwarded and not original:
        original = _external_auth_url(request, forwarded)
    return _notebook_auth(request, original, route_id=workload_id)


def _external_auth_url(request: HttpRequest, forwarded: str) -> str:
    """The URL an ExternalAuth filter asks about: the request's own path after the auth path,
    its host in ``Host`` (read without Django's ALLOWED_HOSTS check: it is only compared with
    the notebook's stored host, never used to build an answer)."""
    host = request.META.get("HTTP_HOST", "")
    proto = request.headers.get("X-Forwarded-Proto", "https")
    query = request.META.get("QUERY_STRING", "")
    return f"{proto}://{host}/{forwarded}" + (f"?{query}" if query else "") if host else ""


def _signin_redirect(request: HttpRequest, original: str) -> HttpResponse:
    """Where a gateway sends a browser without access: the portal's sign-in, back to ``original``
    afterwards (as ingress-nginx's auth-signin does). Only for reads; a script's POST gets 401."""
    method = request.headers.get("X-Forwarded-Method") or request.method or "GET"
    if method.upper() not in {"GET", "HEAD"} or not settings.PORTAL_URL:
        return _refuse(401)
    target = f"{settings.PORTAL_URL}/notebooks/signin/?{urlencode({'rd': original})}"
    return _no_store(HttpResponseRedirect(target))


def _notebook_auth(request: HttpRequest, original: str, *, route_id: int | None) -> HttpResponse:
    if route_id == UNKNOWN_ID:
        # The team's route for notebook paths that name no notebook: answered as someone
        # else's notebook is, so that the gateway does not tell which notebooks exist.
        if request.user.is_authenticated:
            return _refuse(403)
        return _signin_redirect(request, original)
    found = access.notebook_for_url(original)
    if found is None or (route_id is not None and found[0].pk != route_id):
        return _refuse(403)
    workload, location = found
    user_id: int | None = None
    renew = False
    ticket = access.ticket_from_url(original)
    if ticket:
        user_id = access.ticket_redeem(ticket, workload)
        renew = user_id is not None
    if user_id is None and (cookie := request.COOKIES.get(location.cookie_name)):
        checked = access.cookie_user(cookie, workload)
        if checked is not None:
            user_id, renew = checked
    user: User | None = None
    if user_id is not None:
        user = User.objects.filter(pk=user_id).first()
    elif request.user.is_authenticated:
        user = _user(request)
    unauthenticated = _refuse(401) if route_id is None else _signin_redirect(request, original)
    if user is None:
        return unauthenticated
    if not access.may_open(user, workload):
        return _refuse(403)
    if workload.state != core.RUNNING:
        return unauthenticated
    try:
        token = notebook_token_for_ingress(workload)
    except NotebookUnavailable:
        return unauthenticated
    except ClusterError as exc:
        return _refuse(cluster_error_answer(exc)[0])
    response = _no_store(HttpResponse(status=200))
    response["Authorization"] = f"token {token}"
    if renew and user_id is not None:
        response.set_cookie(
            location.cookie_name,
            access.cookie_value(user_id=user_id, workload=workload),
            max_age=settings.NOTEBOOK_ACCESS_SECONDS,
            path=location.cookie_path,
            secure=location.secure,
            httponly=True,
            samesite="Lax",
        )
    return response
