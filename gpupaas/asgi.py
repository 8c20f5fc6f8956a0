"""The portal's ASGI application (gunicorn's uvicorn workers, gpupaas/gunicorn_conf.py).

The gateway's authorisation hooks (``/endpoints/auth/``, ``/notebooks/auth/``: one call
before every request to a notebook or an endpoint) are short synchronous answers asked
hundreds of times a second. Through Django's ASGI handler each one paid a thread-sensitive
context of its own (a new thread for its synchronous code): about 3.5 ms of CPU and a p99 of
10 ms at 200 calls/s on two cores. They are served by Django's WSGI handler instead, on a
pool of threads kept for them (a2wsgi), with the same middleware, settings and database
pool: about half the CPU and a p99 near 4 ms (bench/gateway_bench.py). An endpoint call
whose key this process said "yes" to a moment ago is answered before either, on the event
loop (``apps.web.views.gateway_hooks``). Everything else, the log streams included, stays on
the ASGI handler.
"""

from __future__ import annotations

import os
from typing import Any

from a2wsgi import WSGIMiddleware
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.production")

AUTH_HOOKS = ("/endpoints/auth/", "/notebooks/auth/")
AUTH_HOOK_THREADS = 8

_django = get_asgi_application()
_hooks = WSGIMiddleware(get_wsgi_application(), workers=AUTH_HOOK_THREADS)  # type: ignore[arg-type]

from apps.web.views.gateway_hooks import endpoint_auth_remembered  # noqa: E402 - after setup


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and str(scope.get("path", "")).startswith(AUTH_HOOKS):
        if await endpoint_auth_remembered(scope, send):
            return
        await _hooks(scope, receive, send)  # type: ignore[arg-type]
    else:
        await _django(scope, receive, send)
