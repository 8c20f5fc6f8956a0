from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.common import health as ops


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is alive. Checks nothing else, so it never flaps with a dependency."""
    return HttpResponse("ok\n", content_type="text/plain")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: the database and Redis answer. Says which one failed."""
    checks = [ops.check_database(), ops.check_redis()]
    ok = all(c.ok for c in checks)
    age = ops.worker_heartbeat_age()
    body = {
        "status": "ok" if ok else "unavailable",
        "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks},
        # Informational: a stopped worker does not make the web process unready.
        "worker": {
            "last_heartbeat_seconds_ago": round(age, 1) if age is not None else None,
            "stale": age is None or age > settings.HEARTBEAT_INTERVAL_SECONDS * 4,
        },
    }
    return JsonResponse(body, status=200 if ok else 503)
