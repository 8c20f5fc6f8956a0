"""Endpoints for machines: liveness, readiness and Prometheus metrics.

They are reachable without signing in, so they say as little as their callers need:
``/readyz`` gives anonymous callers from elsewhere only the status (and the status code);
which check failed and the worker heartbeat are for platform admins' sessions and for
callers on this host. ``/metrics`` (view names, error counts, process figures) needs
``Authorization: Bearer <METRICS_TOKEN>``; with no token configured it answers only callers
on this host.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django_prometheus.exports import ExportToDjangoView

from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may
from apps.common import health as ops
from apps.common.http import is_loopback


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is alive. Checks nothing else, so it never flaps with a dependency."""
    return HttpResponse("ok\n", content_type="text/plain")


def _sees_details(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and platform_may(user, Act.SEE_CAPACITY)) or is_loopback(request)


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: the database and Redis answer. Admins and local callers see which one
    failed (the kind of error, never a host or port) and the worker heartbeat."""
    checks = [ops.check_database(), ops.check_redis()]
    ok = all(c.ok for c in checks)
    status = 200 if ok else 503
    body: dict[str, object] = {"status": "ok" if ok else "unavailable"}
    if not _sees_details(request):
        return JsonResponse(body, status=status)
    age = ops.worker_heartbeat_age()
    body["checks"] = {c.name: {"ok": c.ok, "detail": c.detail} for c in checks}
    # Informational: a stopped worker does not make the web process unready.
    body["worker"] = {
        "last_heartbeat_seconds_ago": round(age, 1) if age is not None else None,
        "stale": age is None or age > settings.HEARTBEAT_INTERVAL_SECONDS * 4,
    }
    return JsonResponse(body, status=status)


def _metrics_allowed(request: HttpRequest) -> bool:
    token: str = settings.METRICS_TOKEN
    if not token:
        return is_loopback(request)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for a scraper holding METRICS_TOKEN (401 without it), or for
    callers on this host when no token is set (404 for anyone else)."""
    if not _metrics_allowed(request):
        if not settings.METRICS_TOKEN:
            return HttpResponse("Not found.\n", status=404, content_type="text/plain")
        refused = HttpResponse(
            "Send Authorization: Bearer <METRICS_TOKEN>.\n", status=401, content_type="text/plain"
        )
        refused["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return refused
    exported: HttpResponse = ExportToDjangoView(request)
    return exported
