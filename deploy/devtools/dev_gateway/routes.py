"""Which backend answers a request: routes by host and path with their auth and limits, a pure
function of the cluster's Ingresses, Services and EndpointSlices (as ingress-nginx reads them)."""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from deploy.devtools.dev_gateway.wire import split_host

NGINX = "nginx.ingress.kubernetes.io/"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
STAND_IN = "stand-in"


# The simulated cluster marks each node: "fake" (its pods run no containers) or "real".
NODE_KIND_ANNOTATION = "kubesim.io/node"


# --- routes: a pure function of the cluster's objects ---------------------------------------


@dataclass(frozen=True)
class Auth:
    """ingress-nginx's external auth of a location (the ``auth-*`` annotations)."""

    url: str
    signin: str = ""
    response_headers: tuple[str, ...] = ()
    method: str = ""  # "": the request's own method


@dataclass(frozen=True)
class Limits:
    """ingress-nginx's proxy timeouts (seconds) and body size cap (bytes; None: no cap)."""

    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    send_timeout: float = 60.0
    max_body: int | None = 1024 * 1024


@dataclass(frozen=True)
class Backend:
    """A Service port of an Ingress backend and the ready endpoints behind it."""

    namespace: str
    service: str
    port: str  # as the Ingress names it: a number or a port name
    addresses: tuple[tuple[str, int], ...] = ()
    problem: str = ""  # why there are no addresses
    # Those of the addresses whose pods are on simulated nodes (nothing listens there).
    simulated: frozenset[tuple[str, int]] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.namespace}/{self.service}:{self.port}"


@dataclass(frozen=True)
class Route:
    """One location: a path of an Ingress rule (or the stand-in route of ``--portal``)."""

    source: str  # "namespace/ingress", or "--portal"
    host: str  # "" for any host the Ingresses do not name
    path: str
    path_type: str  # Exact | Prefix | ImplementationSpecific
    backend: Backend | None  # None: the stand-in page
    auth: Auth | None = None
    rewrite_target: str = ""
    limits: Limits = field(default_factory=Limits)
    pattern: re.Pattern[str] | None = None  # a regex location (use-regex, rewrite-target)

    def matches(self, path: str) -> bool:
        if self.path_type == "Exact":
            return path == self.path
        if self.pattern is not None:
            return self.pattern.match(path) is not None
        if self.path_type == "Prefix":
            # Element-wise, as Kubernetes defines it: /a/b matches /a/b and /a/b/c, not /a/bc.
            base = self.path.rstrip("/")
            return not base or path == base or path.startswith(base + "/")
        return path.startswith(self.path)

    def upstream_target(self, path: str, query: str) -> str:
        """The request target the upstream gets: ``rewrite-target`` applied as nginx's
        ``rewrite <path> <target> break`` does (the query kept), or the target as sent."""
        target = path
        if self.rewrite_target:
            pattern = self.pattern or re.compile(re.escape(self.path), re.IGNORECASE)
            found = pattern.match(path)
            if found is not None:
                groups = (found.group(0), *found.groups())

                def group(m: re.Match[str]) -> str:
                    index = int(m.group(1))
                    return (groups[index] or "") if index < len(groups) else ""

                target = re.sub(r"\$(\d)", group, self.rewrite_target)
                if not target.startswith("/"):
                    target = "/" + target
        return f"{target}?{query}" if query else target


@dataclass(frozen=True)
class RouteTable:
    """Locations by server name, each list in the order nginx would match them."""

    servers: Mapping[str, tuple[Route, ...]] = field(default_factory=dict)
    fallback: tuple[Route, ...] = ()
    problems: tuple[str, ...] = ()

    def match(self, host: str, path: str) -> Route | None:
        """The route of a request for ``host`` (a Host header, port or not) and ``path``: the
        server named by the host (exactly, else by a ``*.`` wildcard of one label), else the
        default server of the rules without a host; then its longest matching location."""
        name = split_host(host)
        routes = self.servers.get(name)
        if routes is None and "." in name:
            routes = self.servers.get("*." + name.split(".", 1)[1])
        if routes is None:
            routes = self.servers.get("", ())
        for route in (*routes, *self.fallback):
            if route.matches(path):
                return route
        return None


DEFAULT_LIMITS = Limits()


def parse_size(value: str) -> int | None:
    """An nginx size (``1m``, ``8k``, ``100``); ``0``: no limit."""
    found = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)\s*", value)
    if found is None:
        raise ValueError(f"not an nginx size: {value!r}")
    number = (
        int(found.group(1))
        * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[found.group(2).lower()]
    )
    return number or None


def _limits(annotations: Mapping[str, str], defaults: Limits) -> Limits:
    changes: dict[str, Any] = {}
    for key, attribute in (
        ("proxy-connect-timeout", "connect_timeout"),
        ("proxy-read-timeout", "read_timeout"),
        ("proxy-send-timeout", "send_timeout"),
    ):
        if value := annotations.get(NGINX + key, "").strip():
            with contextlib.suppress(ValueError):
                changes[attribute] = float(value.rstrip("s"))
    if value := annotations.get(NGINX + "proxy-body-size", "").strip():
        with contextlib.suppress(ValueError):
            changes["max_body"] = parse_size(value)
    return replace(defaults, **changes) if changes else defaults


def _auth(annotations: Mapping[str, str]) -> Auth | None:
    url = annotations.get(NGINX + "auth-url", "").strip()
    if not url:
        return None
    headers = annotations.get(NGINX + "auth-response-headers", "")
    return Auth(
        url=url,
        signin=annotations.get(NGINX + "auth-signin", "").strip(),
        response_headers=tuple(h.strip() for h in headers.split(",") if h.strip()),
        method=annotations.get(NGINX + "auth-method", "").strip().upper(),
    )


def resolve_backend(
    namespace: str,
    spec: Mapping[str, Any],
    services: Mapping[tuple[str, str], Mapping[str, Any]],
    slices: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
    simulated_nodes: frozenset[str] = frozenset(),
) -> Backend:
    """The ready endpoints of an Ingress backend, as ingress-nginx finds them: the Service port
    the backend names, then, in each EndpointSlice of the Service, the port of that name (so a
    named targetPort is resolved per endpoint), and the addresses of the endpoints not marked
    unready (those on ``simulated_nodes`` noted as such)."""
    service = spec.get("service") or {}
    name = str(service.get("name") or "")
    port_spec = service.get("port") or {}
    number, port_name = port_spec.get("number"), port_spec.get("name")
    backend = Backend(namespace, name, str(number if number is not None else port_name or ""))
    if not name:
        return replace(
            backend, problem="The backend names no Service (resource backends are not served)."
        )
    found = services.get((namespace, name))
    if found is None:
        return replace(backend, problem=f"There is no Service {namespace}/{name}.")
    service_spec = found.get("spec") or {}
    if service_spec.get("type") == "ExternalName":
        return replace(backend, problem=f"Service {namespace}/{name} is an ExternalName.")
    service_port = next(
        (
            p
            for p in service_spec.get("ports") or []
            if (number is not None and p.get("port") == number)
            or (port_name and p.get("name") == port_name)
        ),
        None,
    )
    if service_port is None:
        return replace(backend, problem=f"Service {namespace}/{name} has no port {backend.port}.")
    protocol = service_port.get("protocol") or "TCP"
    wanted = service_port.get("name") or ""
    addresses: list[tuple[str, int]] = []
    simulated: set[tuple[str, int]] = set()
    for endpoint_slice in slices.get((namespace, name), ()):
        if endpoint_slice.get("addressType") not in {"IPv4", "IPv6"}:
            continue
        target = next(
            (
                p.get("port")
                for p in endpoint_slice.get("ports") or []
                if (p.get("protocol") or "TCP") == protocol
                and (not wanted or (p.get("name") or "") == wanted)
                and p.get("port")
            ),
            None,
        )
        if target is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            # No condition means ready (the API's own reading); ingress-nginx skips the unready.
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                pair = (str(address), int(target))
                if pair not in addresses:
                    addresses.append(pair)
                if endpoint.get("nodeName") in simulated_nodes:
                    simulated.add(pair)
    if not addresses:
        return replace(backend, problem=f"Service {namespace}/{name} has no ready endpoint.")
    return replace(backend, addresses=tuple(addresses), simulated=frozenset(simulated))


def _created(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def routes_from_objects(
    ingresses: Iterable[Mapping[str, Any]],
    services: Iterable[Mapping[str, Any]] = (),
    endpoint_slices: Iterable[Mapping[str, Any]] = (),
    nodes: Iterable[Mapping[str, Any]] = (),
    *,
    defaults: Limits = DEFAULT_LIMITS,
    fallback: Sequence[Route] = (),
) -> RouteTable:
    """The route table of networking.k8s.io/v1 Ingresses, v1 Services and discovery.k8s.io/v1
    EndpointSlices given as the API's plain dicts, as ingress-nginx would build its servers
    (the v1 Nodes say which endpoints are on simulated nodes).

    A host with an Ingress that sets ``use-regex: "true"`` or ``rewrite-target`` has every
    location matched as a case-insensitive regex anchored at the start (ingress-nginx does
    that for the whole server); Exact paths are matched first, then the longest path; for the
    same path the oldest Ingress wins. ``tls``, ``defaultBackend`` and resource backends are
    not served."""
    service_index = {(_created(s)[1], _created(s)[2]): s for s in services}
    simulated_nodes = frozenset(
        _created(n)[2]
        for n in nodes
        if ((n.get("metadata") or {}).get("annotations") or {}).get(NODE_KIND_ANNOTATION) == "fake"
    )
    slice_index: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for endpoint_slice in endpoint_slices:
        meta = endpoint_slice.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if owner:
            slice_index[(str(meta.get("namespace") or ""), str(owner))].append(endpoint_slice)
    problems: list[str] = []
    entries: list[tuple[Mapping[str, Any], str, Mapping[str, Any]]] = []
    regex_hosts: set[str] = set()
    for ingress in sorted(ingresses, key=_created):
        annotations = (ingress.get("metadata") or {}).get("annotations") or {}
        regex = annotations.get(NGINX + "use-regex", "").lower() == "true" or bool(
            annotations.get(NGINX + "rewrite-target")
        )
        for rule in (ingress.get("spec") or {}).get("rules") or []:
            host = str(rule.get("host") or "").lower()
            if regex:
                regex_hosts.add(host)
            for path in (rule.get("http") or {}).get("paths") or []:
                entries.append((ingress, host, path))
    servers: dict[str, list[Route]] = defaultdict(list)
    for ingress, host, path_spec in entries:
        namespace, name = _created(ingress)[1:]
        annotations = (ingress.get("metadata") or {}).get("annotations") or {}
        path = str(path_spec.get("path") or "/")
        path_type = str(path_spec.get("pathType") or "ImplementationSpecific")
        pattern = None
        if host in regex_hosts and path_type != "Exact":
            try:
                pattern = re.compile("^" + path, re.IGNORECASE)
            except re.error as exc:
                problems.append(f"{namespace}/{name}: path {path!r} is no regex: {exc}")
                continue
        backend = resolve_backend(
            namespace, path_spec.get("backend") or {}, service_index, slice_index, simulated_nodes
        )
        route = Route(
            source=f"{namespace}/{name}",
            host=host,
            path=path,
            path_type=path_type,
            backend=backend,
            auth=_auth(annotations),
            rewrite_target=annotations.get(NGINX + "rewrite-target", ""),
            limits=_limits(annotations, defaults),
            pattern=pattern,
        )
        if any(
            r.path == path and r.path_type == path_type and r.source != route.source
            for r in servers[host]
        ):
            problems.append(f"{route.source}: {host or '*'}{path} is served by an older Ingress.")
            continue
        servers[host].append(route)
    ordered = {
        host: tuple(sorted(routes, key=lambda r: (r.path_type != "Exact", -len(r.path))))
        for host, routes in servers.items()
    }
    return RouteTable(servers=ordered, fallback=tuple(fallback), problems=tuple(problems))


def portal_stand_in_route(portal_url: str, *, auth_url: str = "") -> Route:
    """``--portal``: every ``/notebooks/`` path on any host, authorised by the portal as a
    notebook's Ingress is, and answered by the stand-in page."""
    portal = portal_url.rstrip("/")
    return Route(
        source="--portal",
        host="",
        path="/notebooks/",
        path_type="Prefix",
        backend=None,
        auth=Auth(
            url=auth_url or f"{portal}/notebooks/auth/",
            signin=f"{portal}/notebooks/signin/",
            response_headers=("Authorization",),
            method="GET",
        ),
    )
