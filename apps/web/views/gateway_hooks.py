"""The endpoint authorisation hook's remembered answers, served before Django (ASGI).

A gateway asks ``/endpoints/auth/<id>/`` before every call to an endpoint. Most calls carry a
key this process said "yes" to a moment ago (``apps.serving.access``, GATEWAY_AUTH_CACHE_SECONDS):
that answer needs neither the database nor Django's request cycle, only the key's digest, the
process's memory and the guess counter of the caller's address. Served here, on the event
loop, it costs a small part of what the full request cycle costs (bench/gateway_bench.py);
anything else (no key, a key not remembered, a refused address, a session cookie, another
path) goes on to Django's handler, which decides in full and remembers its "yes".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from apps.common.http import caller_address
from apps.serving.access import endpoint_call_remembered

Scope = MutableMapping[str, Any]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_PATH = re.compile(r"/endpoints/auth/(\d{1,18})/")


def _headers(scope: Scope) -> dict[str, str]:
    wanted = {b"authorization", b"x-api-key", b"x-forwarded-for"}
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        lowered = name.lower()
        if lowered in wanted:
            text = value.decode("latin-1")
            key = lowered.decode()
            # Repeated X-Forwarded-For lines are one list, as Django's WSGI handler joins them.
            found[key] = f"{found[key]},{text}" if key in found else text
    return found


async def endpoint_auth_remembered(scope: Scope, send: Send) -> bool:
    """Answer the hook from this process's memory when it may (True), else leave the request
    to Django (False, nothing sent)."""
    match = _PATH.fullmatch(str(scope.get("path", "")))
    if match is None:
        return False
    headers = _headers(scope)  # a key wins over a session cookie, as in the full decision
    client = scope.get("client") or (None, None)
    try:
        verdict = endpoint_call_remembered(
            endpoint_id=int(match.group(1)),
            authorization=headers.get("authorization", ""),
            api_key=headers.get("x-api-key", ""),
            source_ip=caller_address(client[0], headers.get("x-forwarded-for", "")),
        )
    except Exception:  # whatever fails here, Django decides in full (and says why)
        return False
    if verdict is None:
        return False
    body = verdict.message.encode()
    await send(
        {
            "type": "http.response.start",
            "status": verdict.status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
    return True
