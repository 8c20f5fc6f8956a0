"""Gateway API routes of notebooks and endpoints: an HTTPRoute attached to the platform's
Gateway, and what makes the gateway ask the portal about every request. Pure.

The portal's authorisation is bound to the route: the auth address a route's filter calls
names the workload the route serves (``.../auth/<id>/``), so the workload the portal decides
on is the one the gateway routes to, whatever the path looked like before the gateway
normalised it. The portal also checks that the forwarded path belongs to that workload.

Implementations (``GatewayShape.implementation``):

* ``traefik``: a ``traefik.io/v1alpha1`` Middleware with ``forwardAuth`` beside the route, in
  the route's namespace, named by the route's ``ExtensionRef`` filter. Traefik sends the
  request's method, host and URI in ``X-Forwarded-*``, never its body; a 2xx lets the request
  through with the headers named in ``authResponseHeaders``, anything else is the answer.
* ``external-auth``: Gateway API's ``ExternalAuth`` filter (experimental channel) calling the
  portal's Service, the auth path as the prefix of the forwarded path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.orchestration.manifests.base import Manifest
from apps.orchestration.manifests.pods import workload_meta
from apps.orchestration.manifests.spec import GatewayShape, WorkloadSpec

GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTPROUTE_API_VERSION = f"{GATEWAY_GROUP}/v1"
TRAEFIK_GROUP = "traefik.io"
MIDDLEWARE_API_VERSION = f"{TRAEFIK_GROUP}/v1alpha1"
AUTH_SUFFIX = "-auth"

IMPLEMENTATION_TRAEFIK = "traefik"
IMPLEMENTATION_EXTERNAL_AUTH = "external-auth"


def _service_ref(value: str) -> dict[str, Any]:
    """``namespace/name:port`` → a Service backend reference."""
    ref, _, port = value.rpartition(":")
    namespace, _, name = ref.partition("/")
    return {"kind": "Service", "namespace": namespace, "name": name, "port": int(port)}


def _auth_path(auth_url: str) -> str:
    """The path of an auth URL: ``http://portal:8000/notebooks/auth/7/`` → ``/notebooks/auth/7``."""
    rest = auth_url.split("://", 1)[-1]
    path = "/" + rest.partition("/")[2]
    return path.rstrip("/") or "/"


def auth_filter(
    middleware: str,
    gateway: GatewayShape,
    *,
    auth_url: str,
    response_headers: Sequence[str] = (),
) -> dict[str, Any]:
    """The route filter that makes the gateway ask ``auth_url`` about every request (for
    Traefik, through the Middleware named ``middleware`` in the route's namespace)."""
    if gateway.implementation == IMPLEMENTATION_EXTERNAL_AUTH:
        http: dict[str, Any] = {"path": _auth_path(auth_url)}
        if response_headers:
            http["allowedResponseHeaders"] = list(response_headers)
        return {
            "type": "ExternalAuth",
            "externalAuth": {
                "protocol": "HTTP",
                "backendRef": _service_ref(gateway.auth_service),
                "http": http,
            },
        }
    return {
        "type": "ExtensionRef",
        "extensionRef": {
            "group": TRAEFIK_GROUP,
            "kind": "Middleware",
            "name": middleware,
        },
    }


def forward_auth_middleware(
    metadata: dict[str, Any],
    *,
    auth_url: str,
    response_headers: Sequence[str] = (),
    response_cookies: Sequence[str] = (),
) -> Manifest:
    """Traefik's forwardAuth for one route. ``trustForwardHeader`` stays off: the
    ``X-Forwarded-*`` headers the portal decides on are Traefik's own, never a client's."""
    forward: dict[str, Any] = {"address": auth_url, "trustForwardHeader": False}
    if response_headers:
        forward["authResponseHeaders"] = list(response_headers)
    if response_cookies:
        forward["addAuthCookiesToResponse"] = list(response_cookies)
    return {
        "apiVersion": MIDDLEWARE_API_VERSION,
        "kind": "Middleware",
        "metadata": metadata,
        "spec": {"forwardAuth": forward},
    }


def http_route(
    metadata: dict[str, Any],
    gateway: GatewayShape,
    *,
    hostname: str,
    path: str,
    service: str,
    port: int,
    filters: Sequence[dict[str, Any]],
) -> Manifest:
    """One rule: requests under ``path`` (on ``hostname`` when set) go through ``filters`` to
    ``service:port``."""
    parent: dict[str, Any] = {
        "group": GATEWAY_GROUP,
        "kind": "Gateway",
        "namespace": gateway.namespace,
        "name": gateway.name,
    }
    if gateway.section:
        parent["sectionName"] = gateway.section
    route_spec: dict[str, Any] = {
        "parentRefs": [parent],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "filters": list(filters),
                "backendRefs": [{"name": service, "port": port}],
            }
        ],
    }
    if hostname:
        route_spec["hostnames"] = [hostname]
    return {
        "apiVersion": HTTPROUTE_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": metadata,
        "spec": route_spec,
    }


def route_manifests(
    spec: WorkloadSpec,
    gateway: GatewayShape,
    *,
    hostname: str,
    path: str,
    service: str,
    port: int,
    auth_url: str,
    response_headers: Sequence[str] = (),
    response_cookies: Sequence[str] = (),
    rewrite_prefix: str | None = None,
) -> list[Manifest]:
    """The HTTPRoute (its path prefix replaced by ``rewrite_prefix`` on the way in when set)
    and, for Traefik, its forwardAuth Middleware. No ``auth_url``: no route at all (the
    portal never publishes a route it does not guard)."""
    if not auth_url:
        return []
    filters = [
        auth_filter(
            spec.base_name + AUTH_SUFFIX,
            gateway,
            auth_url=auth_url,
            response_headers=response_headers,
        )
    ]
    if rewrite_prefix is not None:
        filters.append(
            {
                "type": "URLRewrite",
                "urlRewrite": {
                    "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": rewrite_prefix}
                },
            }
        )
    manifests = [
        http_route(
            workload_meta(spec),
            gateway,
            hostname=hostname,
            path=path,
            service=service,
            port=port,
            filters=filters,
        )
    ]
    if gateway.implementation == IMPLEMENTATION_TRAEFIK:
        manifests.append(
            forward_auth_middleware(
                workload_meta(spec, AUTH_SUFFIX),
                auth_url=auth_url,
                response_headers=response_headers,
                response_cookies=response_cookies,
            )
        )
    return manifests


# A team's endpoint (notebook) paths that name no endpoint (notebook): the gateway would
# answer its own 404 there and a 401 (a sign-in) where one exists, telling anyone which exist.
# One route per team namespace takes the rest of its prefix (the longest prefix wins, so each
# endpoint's or notebook's own route keeps its requests) and asks the portal about id 0, which
# never exists: the answer is the portal's, the same as for a wrong key (a guess counts as one)
# or, for notebooks, the same as for someone else's notebook (the sign-in, or 403 for a
# signed-in person). Its Service has no endpoints and is never reached.
UNKNOWN_ENDPOINT = "gpupaas-unknown-endpoint"
UNKNOWN_NOTEBOOK = "gpupaas-unknown-notebook"
UNKNOWN_ID = 0


def unknown_route_manifests(
    metadata: dict[str, Any],
    gateway: GatewayShape,
    *,
    hostname: str,
    path: str,
    auth_url: str,
) -> list[Manifest]:
    """The Service, the HTTPRoute (``path`` on ``hostname``) and, for Traefik, the
    forwardAuth Middleware that answer for endpoints or notebooks that do not exist;
    ``metadata`` names them (the same name for all three) in the team's namespace."""
    if not (hostname and auth_url):
        return []
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]},
    }
    name = str(metadata["name"])
    filters = [auth_filter(name, gateway, auth_url=auth_url)]
    route = http_route(
        metadata, gateway, hostname=hostname, path=path, service=name, port=80, filters=filters
    )
    manifests = [service, route]
    if gateway.implementation == IMPLEMENTATION_TRAEFIK:
        manifests.append(forward_auth_middleware(metadata, auth_url=auth_url))
    return manifests
