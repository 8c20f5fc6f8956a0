from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    """The caller's address.

    With ``TRUSTED_PROXY_COUNT=N`` (N > 0) every request is taken to pass through N proxies,
    each appending the address it received the request from to ``X-Forwarded-For``; the
    N-th entry from the right is then the address the outermost trusted proxy saw, and
    anything the client wrote itself stands to the left of it and is never read. With N = 0
    the header is ignored and the TCP peer (``REMOTE_ADDR``) is the caller. A header with
    fewer than N entries did not come through the proxies, and an entry that is not an
    address was not written by one: the TCP peer is used for both.
    """
    return caller_address(
        request.META.get("REMOTE_ADDR") or None, request.META.get("HTTP_X_FORWARDED_FOR", "")
    )


def caller_address(peer: str | None, forwarded_for: str) -> str | None:
    """``client_ip`` from the TCP peer and the ``X-Forwarded-For`` header as they came (for
    code that has no Django request)."""
    hops = settings.TRUSTED_PROXY_COUNT
    if hops > 0:
        parts = [p.strip() for p in forwarded_for.split(",") if p.strip()]
        if len(parts) >= hops and _address(parts[-hops]):
            return parts[-hops]
    return peer or None


def _address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _loopback(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def is_loopback(request: HttpRequest) -> bool:
    """The request comes from this host: the TCP peer is a loopback address and so is the
    caller that the trusted proxies name (``client_ip``). Both must hold, so neither a proxy
    on this host (peer 127.0.0.1, caller elsewhere) nor a spoofed ``X-Forwarded-For`` sent
    straight to the port (caller "127.0.0.1", peer elsewhere) passes."""
    return _loopback(request.META.get("REMOTE_ADDR")) and _loopback(client_ip(request))
