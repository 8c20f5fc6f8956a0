"""Opening a notebook through the portal, and only through it.

Every request to a notebook passes the ingress, which asks the portal first (ingress-nginx
``auth-url``, see ``manifests.notebook_ingress_annotations``). The portal says yes to the
notebook's owner and to platform admins, and answers with the Jupyter token in an
``Authorization`` header that the ingress hands to Jupyter: the token never reaches a browser
or a URL.

A notebook with its own host cannot read the portal's session cookie, so the portal's "Open"
redirect carries a ticket: signed, bound to one person and one notebook, valid for
``NOTEBOOK_TICKET_SECONDS`` and redeemable once. Redeeming it sets a signed cookie on the
notebook's host only (no Domain attribute), bound to the same person and notebook, valid for
``NOTEBOOK_ACCESS_SECONDS`` and renewed while in use. Each request still checks that the person
may open the notebook now, so a revoked admin or a notebook that changed hands is refused at
once, whatever the cookie says.

Where a notebook is served: with ``NOTEBOOK_WILDCARD_HOST`` ("*.nb.gpu.example.com") on a host
of its own, ``<ingress name>.nb.gpu.example.com`` (the stored name of its Ingress, never
derived from a person), so no two notebooks share an origin; otherwise on ``NOTEBOOK_HOST``
under a path of its own.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.core import signing

from apps.common.ratelimit import failures_per_window, rate_limiter
from apps.orchestration import manifests as m
from apps.orchestration.names import stored_name
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_may_open

if TYPE_CHECKING:
    from apps.accounts.models import User

TICKET_PARAM = "gpupaas-ticket"
COOKIE_PREFIX = m.NOTEBOOK_COOKIE_PREFIX
_TICKET_SALT = "gpupaas.notebook.ticket"
_COOKIE_SALT = "gpupaas.notebook.access"
_PATH_RE = re.compile(r"^/notebooks/(?P<namespace>[a-z0-9-]+)/(?P<id>[0-9]+)/")


def _split_scheme(value: str) -> tuple[str, str]:
    """``"https://host"`` or ``"host"`` (https) → (scheme, bare host)."""
    value = value.strip().rstrip("/")
    if "://" in value:
        scheme, _, host = value.partition("://")
        return scheme.lower(), host.lower()
    return "https", value.lower()


def exposed() -> bool:
    """Whether notebooks are served through an ingress at all (otherwise: port-forward)."""
    return bool(settings.NOTEBOOK_WILDCARD_HOST or settings.NOTEBOOK_HOST)


def ingress_host(ingress_name: str) -> str:
    """The host a notebook's Ingress answers on: its own under the wildcard, or the shared one."""
    if settings.NOTEBOOK_WILDCARD_HOST:
        _, wildcard = _split_scheme(settings.NOTEBOOK_WILDCARD_HOST)
        return f"{ingress_name}.{wildcard.removeprefix('*.')}"
    return _split_scheme(settings.NOTEBOOK_HOST)[1] if settings.NOTEBOOK_HOST else ""


def gateway_shape() -> m.GatewayShape | None:
    """The Gateway notebooks' and endpoints' routes attach to, or None with TRAFFIC_API=ingress."""
    if settings.TRAFFIC_API != "gateway-api":
        return None
    return m.GatewayShape(
        name=settings.GATEWAY_NAME,
        namespace=settings.GATEWAY_NAMESPACE,
        section=settings.GATEWAY_LISTENER,
        implementation=settings.GATEWAY_IMPLEMENTATION,
        auth_service=settings.GATEWAY_AUTH_SERVICE,
    )


def proxy_namespace() -> str:
    """Where the proxies that reach notebooks and endpoints run (their network policies let in
    only that namespace): the gateway's, or the ingress controller's."""
    if settings.TRAFFIC_API == "gateway-api":
        return settings.GATEWAY_PROXY_NAMESPACE
    return settings.NOTEBOOK_INGRESS_NAMESPACE


def route_name(workload: Workload) -> str:
    """The stored name of the notebook's route (its HTTPRoute, or its Ingress), or ""."""
    return stored_name(workload, "HTTPRoute") or stored_name(workload, "Ingress")


def ingress_settings(ingress_name: str) -> dict[str, Any]:
    """The WorkloadSpec fields that say how a notebook's route is exposed and guarded."""
    host = ingress_host(ingress_name)
    return {
        "notebook_gateway": gateway_shape() if host else None,
        # An Ingress rule names a host without a port (development serves notebooks on one,
        # e.g. NOTEBOOK_HOST=http://notebooks.localhost:8890).
        "notebook_host": host.rsplit(":", 1)[0] if ":" in host else host,
        "notebook_tls_secret": settings.NOTEBOOK_TLS_SECRET if host else "",
        "notebook_auth_url": settings.NOTEBOOK_AUTH_URL if host else "",
        "notebook_signin_url": f"{settings.PORTAL_URL}/notebooks/signin/"
        if host and settings.PORTAL_URL
        else "",
    }


def workload_ingress_settings(workload: Workload) -> dict[str, Any]:
    """``ingress_settings`` for a notebook: its stored Ingress name once created, the name the
    manifests create it under before."""
    return ingress_settings(route_name(workload) or m.object_name(workload.pk))


@dataclass(frozen=True)
class NotebookLocation:
    scheme: str
    host: str
    path: str  # Jupyter's base URL, ends with "/"
    own_host: bool
    workload_id: int

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}{self.path}"

    @property
    def cookie_name(self) -> str:
        return f"{COOKIE_PREFIX}{self.workload_id}"

    @property
    def cookie_path(self) -> str:
        return "/" if self.own_host else self.path

    @property
    def secure(self) -> bool:
        return self.scheme == "https"


def notebook_location(workload: Workload) -> NotebookLocation | None:
    """Where the browser reaches the notebook, or None when no ingress host is configured or
    its Ingress has not been created yet."""
    if not exposed():
        return None
    ingress = route_name(workload)
    if not ingress:
        return None
    path = m.notebook_path(workload.team.namespace, workload.pk)
    if settings.NOTEBOOK_WILDCARD_HOST:
        scheme, _ = _split_scheme(settings.NOTEBOOK_WILDCARD_HOST)
        return NotebookLocation(scheme, ingress_host(ingress), path, True, workload.pk)
    scheme, host = _split_scheme(settings.NOTEBOOK_HOST)
    return NotebookLocation(scheme, host, path, False, workload.pk)


def notebook_for_url(url: str) -> tuple[Workload, NotebookLocation] | None:
    """The notebook a URL on a notebook host belongs to (the original URL of a request the
    ingress asks about, or where the sign-in is to return), or None."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.port:
        host = f"{host}:{parts.port}"
    match = _PATH_RE.match(parts.path or "")
    if not host or match is None:
        return None
    # The path names the notebook; its stored Ingress name must then give this very host.
    workload = (
        Workload.objects.select_related("team", "owner")
        .filter(pk=int(match["id"]), kind=wl.KIND_NOTEBOOK)
        .first()
    )
    if workload is None:
        return None
    location = notebook_location(workload)
    if location is None or location.host != host or not parts.path.startswith(location.path):
        return None
    return workload, location


# --- tickets and cookies --------------------------------------------------------------------


def ticket_mint(*, user: User, workload: Workload) -> str:
    """A one-time ticket for ``user`` to enter ``workload``'s notebook."""
    return signing.dumps(
        {"w": workload.pk, "u": user.pk, "n": secrets.token_urlsafe(16)}, salt=_TICKET_SALT
    )


def ticket_redeem(ticket: str, workload: Workload) -> int | None:
    """The id of the person a ticket admits to this notebook, or None: forged, expired, for
    another notebook, or already used (counted in the shared rate-limit store, so a ticket is
    used once across every web process; if the store is down, tickets are refused)."""
    try:
        data = signing.loads(ticket, salt=_TICKET_SALT, max_age=settings.NOTEBOOK_TICKET_SECONDS)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("w") != workload.pk:
        return None
    once = failures_per_window(1, settings.NOTEBOOK_TICKET_SECONDS + 5)
    decision = rate_limiter().hit(once, str(data.get("n")), namespace="nb-ticket", exact=True)
    if not decision.allowed or decision.store_down:
        return None
    user_id = data.get("u")
    return user_id if isinstance(user_id, int) else None


def cookie_value(*, user_id: int, workload: Workload) -> str:
    return signing.dumps({"w": workload.pk, "u": user_id, "t": int(time.time())}, salt=_COOKIE_SALT)


def cookie_user(value: str, workload: Workload) -> tuple[int, bool] | None:
    """(person id, whether the cookie is past half its life and should be renewed), or None."""
    try:
        data: Any = signing.loads(
            value, salt=_COOKIE_SALT, max_age=settings.NOTEBOOK_ACCESS_SECONDS
        )
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("w") != workload.pk:
        return None
    user_id, issued = data.get("u"), data.get("t")
    if not isinstance(user_id, int) or not isinstance(issued, int):
        return None
    return user_id, time.time() - issued > settings.NOTEBOOK_ACCESS_SECONDS / 2


def ticket_from_url(url: str) -> str:
    values = parse_qs(urlsplit(url).query).get(TICKET_PARAM) or [""]
    return values[0]


def may_open(user: User | None, workload: Workload) -> bool:
    return user is not None and user.is_active and workload_may_open(user, workload)
