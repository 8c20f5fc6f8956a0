"""The two ways out: an e-mail through Django's mail backend and a webhook POST.

Each raises :class:`TransientError` for what may work on a later attempt (connection refused,
time-outs, a 5xx or 429 answer, an SMTP 4xx) and :class:`PermanentError` for what never will
(a refused recipient, a 4xx answer, a URL that points inside the network).
"""

from __future__ import annotations

import ipaddress
import smtplib
import socket
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection

from apps.notifications import core


class TransientError(Exception):
    pass


class PermanentError(Exception):
    pass


def send_email(*, to: str, message: core.Message) -> None:
    mail = EmailMultiAlternatives(
        subject=message.subject,
        body=message.text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
    )
    mail.attach_alternative(message.html, "text/html")
    try:
        mail.send(fail_silently=False)
    except smtplib.SMTPRecipientsRefused as exc:
        raise PermanentError(f"the mail server refused {to}: {exc.recipients}") from exc
    except smtplib.SMTPResponseException as exc:
        text = f"mail server answered {exc.smtp_code}: {exc.smtp_error!r}"
        if 500 <= exc.smtp_code < 600:
            raise PermanentError(text) from exc
        raise TransientError(text) from exc
    except (smtplib.SMTPException, OSError) as exc:
        raise TransientError(f"mail server: {exc}") from exc


def _resolve(host: str, port: int) -> str:
    """One address of ``host`` that may be called; every address it resolves to must be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TransientError(f"cannot resolve {host}: {exc}") from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    allow = settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK
    if not addresses or not all(core.address_allowed(a, allow_loopback=allow) for a in addresses):
        raise PermanentError(f"{host} resolves to an address that is not called")
    return str(addresses[0])


def post_webhook(*, url: str, payload: dict[str, str]) -> None:
    """POST the JSON to the URL, connecting to the address checked here (not a second lookup,
    which could answer differently), never following redirects."""
    try:
        url = core.webhook_url_check(url, allow_loopback=settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK)
    except core.WebhookUrlError as exc:
        raise PermanentError(str(exc)) from exc
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = _resolve(host, port)
    netloc = f"[{address}]" if ":" in address else address
    pinned = urlunsplit((parts.scheme, f"{netloc}:{port}", parts.path or "/", parts.query, ""))
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    try:
        with httpx.Client(timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_SECONDS) as client:
            response = client.post(
                pinned,
                json=payload,
                headers={"Host": host_header, "User-Agent": "gpupaas-notifications"},
                extensions={"sni_hostname": host},
                follow_redirects=False,
            )
    except httpx.HTTPError as exc:
        raise TransientError(f"webhook: {exc.__class__.__name__}: {exc}") from exc
    status = response.status_code
    if 200 <= status < 300:
        return
    text = f"webhook answered {status}: {response.text[:200]!r}"
    if status == 429 or status >= 500:
        raise TransientError(text)
    raise PermanentError(text)
