"""The ingress of the development setup: a reverse proxy that does ingress-nginx's part.

In parts: :mod:`.routes` (which backend answers a request: a pure function of the cluster's
objects), :mod:`.cluster` (those objects, listed every few seconds), :mod:`.wire` (HTTP/1.1 on
sockets: targets, messages, framing), :mod:`.proxy` (the gateway and one connection's
exchanges) and :mod:`.server` (starting it, the command line).

In production every request to a notebook or an inference endpoint passes ingress-nginx. This
gateway does the same with the same objects: it reads the cluster's Ingresses, Services and
EndpointSlices (listed every few seconds), routes by host and path as ingress-nginx does (the
longest path wins; ``use-regex`` and ``rewrite-target`` as the endpoint Ingress sets them),
asks the annotation's ``auth-url`` about every single request (2xx: proxied, with the headers
named by ``auth-response-headers`` and the portal's cookies; 401: sent to ``auth-signin`` with
``rd``; anything else: refused) and proxies to a ready endpoint of the Service (pod IPs, not the
ClusterIP): HTTP/1.1 with bodies, streamed responses and WebSocket upgrades.

A request whose path is not normalised (``.``/``..`` segments, ``//``, a percent-encoded dot,
slash or backslash, ``;``) is answered 400 before routing and before the portal is asked: the
portal must authorise the very path the upstream serves.

Simulated nodes run no containers: with ``--stand-in`` a request whose Service's ready
endpoints are all on simulated nodes (annotated ``kubesim.io/node: fake``) is answered, once
authorised, by a small page instead (it says whether the portal handed over the notebook's
token, never the token itself). ``--portal`` alone, without a cluster, serves every
``/notebooks/`` path with that page, authorised by the portal.

    .venv/bin/python -m deploy.devtools.dev_gateway --port 8890 \\
        --kubeconfig var/kubesim/admin.kubeconfig [--stand-in] [--portal http://127.0.0.1:8000]

with the portal started with ``NOTEBOOK_HOST=http://notebooks.localhost:8890`` and
``PORTAL_URL=http://127.0.0.1:8000``. Plain HTTP only: an Ingress's ``tls`` is not served.
"""

from __future__ import annotations

from deploy.devtools.dev_gateway.cluster import (
    ClusterRoutes,
)
from deploy.devtools.dev_gateway.proxy import (
    Gateway,
)
from deploy.devtools.dev_gateway.routes import (
    DEFAULT_LIMITS,
    NGINX,
    NODE_KIND_ANNOTATION,
    SERVICE_NAME_LABEL,
    STAND_IN,
    Auth,
    Backend,
    Limits,
    Route,
    RouteTable,
    parse_size,
    portal_stand_in_route,
    resolve_backend,
    routes_from_objects,
)
from deploy.devtools.dev_gateway.server import (
    main,
    start,
)
from deploy.devtools.dev_gateway.wire import (
    CHUNK,
    DRAIN_SECONDS,
    FORWARDING,
    HEAD_LIMIT,
    HOP_BY_HOP,
    MAX_HEADERS,
    NEXT_UPSTREAM_TRIES,
    split_host,
    target_refusal,
)

__all__ = [
    "CHUNK",
    "DEFAULT_LIMITS",
    "DRAIN_SECONDS",
    "FORWARDING",
    "HEAD_LIMIT",
    "HOP_BY_HOP",
    "MAX_HEADERS",
    "NEXT_UPSTREAM_TRIES",
    "NGINX",
    "NODE_KIND_ANNOTATION",
    "SERVICE_NAME_LABEL",
    "STAND_IN",
    "Auth",
    "Backend",
    "ClusterRoutes",
    "Gateway",
    "Limits",
    "Route",
    "RouteTable",
    "main",
    "parse_size",
    "portal_stand_in_route",
    "resolve_backend",
    "routes_from_objects",
    "split_host",
    "start",
    "target_refusal",
]
