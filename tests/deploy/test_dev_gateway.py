"""The development gateway (deploy/devtools/dev_gateway.py) doing ingress-nginx's part.

Routing is tested as a pure function of Ingress, Service and EndpointSlice dicts (the
portal's own manifests among them). The proxy is tested end to end against a local upstream
HTTP and WebSocket server and a stand-in for the portal's auth endpoints, all on 127.0.0.1 on
free ports: first with a route table built from plain dicts, then on the simulated cluster
with a Service without selector and a hand-written EndpointSlice pointing at the upstream.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client

from apps.orchestration import manifests as m
from deploy.devtools import dev_gateway as gw
from deploy.devtools import kubesim as ks
from tests.plugins.kubesim import admin_kubeconfig, apply_manifests
from tests.waiting import wait_for

# --- the parts the gateway talks to ----------------------------------------------------------

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NOTEBOOK_TOKEN = "nb-secret-token"
ENDPOINT_KEY = "good-key"


def ws_accept(key: str) -> str:
    digest = hashlib.sha1((key + WS_GUID).encode(), usedforsecurity=False).digest()
    return base64.b64encode(digest).decode()


def ws_frame(payload: bytes, opcode: int = 1, *, mask: bool) -> bytes:
    head = bytes([0x80 | opcode])
    size = len(payload)
    bit = 0x80 if mask else 0
    if size < 126:
        head += bytes([bit | size])
    elif size < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", size)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_read(stream: BinaryIO) -> tuple[int, bytes]:
    first = stream.read(2)
    if len(first) < 2:
        raise ConnectionError("the WebSocket ended")
    opcode, size = first[0] & 0x0F, first[1] & 0x7F
    masked = bool(first[1] & 0x80)
    if size == 126:
        size = struct.unpack("!H", stream.read(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", stream.read(8))[0]
    key = stream.read(4) if masked else b""
    payload = stream.read(size)
    if masked:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return opcode, payload


class _Recording(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, handler: type[BaseHTTPRequestHandler], address: str = "127.0.0.1") -> None:
        super().__init__((address, 0), handler)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def address(self) -> str:
        return str(self.server_address[0])

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def record(self, handler: BaseHTTPRequestHandler, **extra: Any) -> dict[str, Any]:
        entry = {
            "method": handler.command,
            "path": handler.path,
            "headers": [[k, v] for k, v in handler.headers.items()],
            **extra,
        }
        with self.lock:
            self.requests.append(entry)
        return entry

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)


class Upstream(_Recording):
    """Echoes each request as JSON (method, path, headers, the body's length and sha256); an
    upgrade to a WebSocket is an echo; ``…/stream`` answers a first chunk and the second only
    once ``release`` is set; ``…/unframed`` ends its body by closing; ``…/barrier`` answers only
    when ``barrier`` has all its parties."""

    def __init__(self, parties: int = 50, address: str = "127.0.0.1") -> None:
        super().__init__(_UpstreamHandler, address)
        self.release = threading.Event()
        self.barrier = threading.Barrier(parties)


class _UpstreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Upstream

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in {b"\r\n", b"\n", b""}:
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self) -> None:
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
            return
        body = self._body()
        self.server.record(self, body_length=len(body))
        if self.path.endswith("/stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"6\r\nfirst\n\r\n")
            self.wfile.flush()
            self.server.release.wait(10)
            self.wfile.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
            return
        if self.path.endswith("/unframed"):  # HTTP/1.0 style: the body ends with the connection
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until the end")
            self.close_connection = True
            return
        if self.path.endswith("/barrier"):
            self.server.barrier.wait(20)
        data = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body_length": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Set-Cookie", "upstream=1; Path=/")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

    def _websocket(self) -> None:
        self.server.record(self)
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", ws_accept(self.headers["Sec-WebSocket-Key"]))
        self.end_headers()
        self.wfile.flush()
        while True:
            try:
                opcode, payload = ws_read(self.rfile)  # type: ignore[arg-type]
            except (ConnectionError, OSError):
                return
            if opcode == 8:
                self.wfile.write(ws_frame(payload, 8, mask=False))
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(ws_frame(b"echo:" + payload, opcode, mask=False))
            self.wfile.flush()


class FakePortal(_Recording):
    """The portal's auth endpoints as the ingress sees them. ``/notebooks/auth/``: cookie
    ``session=alice`` → 200 with the notebook's token in ``Authorization`` and a cookie,
    ``session=bob`` → 403, no session → 401. ``/endpoints/auth/<id>/``: ``Authorization:
    Bearer good-key`` → 200, another key or none → 401 with ``WWW-Authenticate``."""

    def __init__(self) -> None:
        super().__init__(_PortalHandler)


class _PortalHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakePortal

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.server.record(self)
        cookie = self.headers.get("Cookie", "")
        headers: list[tuple[str, str]] = []
        if self.path.startswith("/notebooks/auth/"):
            if "session=alice" in cookie:
                status = 200
                headers = [
                    ("Authorization", f"token {NOTEBOOK_TOKEN}"),
                    ("Set-Cookie", "nb-access=renewed; Path=/notebooks/; HttpOnly"),
                ]
            elif "session=bob" in cookie:
                status = 403
            else:
                status = 401
        elif self.path.startswith("/endpoints/auth/"):
            if self.headers.get("Authorization") == f"Bearer {ENDPOINT_KEY}":
                status = 200
            else:
                status = 401
                headers = [("WWW-Authenticate", 'Bearer realm="gpupaas endpoint"')]
        else:
            status = 404
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_HEAD = _answer


@contextmanager
def serving(server: _Recording) -> Iterator[Any]:
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def read_head(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (last value of each, lower-case names) and what came after them."""
    data = b""
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or time.monotonic() > deadline:
            raise ConnectionError(f"no complete head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, rest


class WebSocket:
    """A WebSocket client on a socket whose upgrade has been answered 101."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self.stream = _Prefixed(rest, sock.makefile("rb"))

    def send(self, text: str) -> None:
        self.sock.sendall(ws_frame(text.encode(), mask=True))

    def receive(self) -> tuple[int, bytes]:
        return ws_read(self.stream)  # type: ignore[arg-type]

    def close(self) -> None:
        self.sock.sendall(ws_frame(b"\x03\xe8", 8, mask=True))


class _Prefixed:
    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self.prefix = prefix
        self.stream = stream

    def read(self, n: int) -> bytes:
        if self.prefix:
            data, self.prefix = self.prefix[:n], self.prefix[n:]
            if len(data) < n:
                data += self.stream.read(n - len(data))
            return data
        return self.stream.read(n)


def open_websocket(
    gateway_port: int, host: str, path: str, *, cookie: str = ""
) -> tuple[socket.socket, int, dict[str, str], bytes]:
    """Send a WebSocket upgrade through the gateway; the socket, status, headers, and bytes
    read past the head."""
    sock = socket.create_connection(("127.0.0.1", gateway_port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        f"Origin: http://{host}",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    status, headers, rest = read_head(sock)
    if status == 101:
        assert headers.get("sec-websocket-accept") == ws_accept(key)
    return sock, status, headers, rest


# --- the portal's objects, and the route table the gateway makes of them ---------------------

NAMESPACE = "team-vision"
NOTEBOOK_ID = 10
ENDPOINT_ID = 7
NOTEBOOK_HOST = "notebooks.example.test"
ENDPOINT_HOST = "endpoints.example.test"


def _spec(namespace: str, **kw: Any) -> m.WorkloadSpec:
    values: dict[str, Any] = {
        "name": "lab",
        "team_slug": "vision",
        "namespace": namespace,
        "owner": "alice",
        "image": "quay.io/jupyter/base-notebook:2025-01-01",
        "gpu_limits": {"nvidia.com/gpu": "1"},
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "sharing_mode": "whole",
        "priority_class": "development",
        **kw,
    }
    return m.WorkloadSpec(**values)


def notebook_ingress(namespace: str, host: str, portal_url: str) -> dict[str, Any]:
    """The notebook's Ingress exactly as the portal builds it."""
    objects = m.notebook_manifests(
        _spec(
            namespace,
            id=NOTEBOOK_ID,
            kind="notebook",
            notebook_host=host,
            notebook_auth_url=f"{portal_url}/notebooks/auth/",
            notebook_signin_url=f"{portal_url}/notebooks/signin/",
            home_claim="home-u1",
        )
    )
    return next(o for o in objects if o["kind"] == "Ingress")


def endpoint_ingress(namespace: str, host: str, portal_url: str) -> dict[str, Any]:
    """The endpoint's Ingress exactly as the portal builds it (regex path, rewrite-target)."""
    shape = m.EndpointShape(
        port=8000, health_path="/health", host=host, auth_url=f"{portal_url}/endpoints/auth/"
    )
    objects = m.endpoint_manifests(
        _spec(
            namespace, id=ENDPOINT_ID, kind="inference", priority_class="production", endpoint=shape
        )
    )
    return next(o for o in objects if o["kind"] == "Ingress")


def selectorless_service(namespace: str, name: str, target_port: int) -> dict[str, Any]:
    """The Service the portal makes (port 80 → the server's port), without a selector: its
    endpoints are what a hand-written EndpointSlice says."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": target_port}]},
    }


def endpoint_slice(
    namespace: str, service: str, port: int, addresses: list[str], *, ready: bool | None = True
) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"addresses": addresses}
    if ready is not None:
        endpoint["conditions"] = {"ready": ready}
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-manual",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [endpoint],
    }


def portal_objects(
    namespace: str,
    portal_url: str,
    upstream_port: int,
    *,
    hosts: tuple[str, str],
    address: str = "127.0.0.1",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A notebook and an endpoint as the portal publishes them, both served by the upstream."""
    notebook, endpoint = f"wl-{NOTEBOOK_ID}", f"wl-{ENDPOINT_ID}"
    return (
        [
            notebook_ingress(namespace, hosts[0], portal_url),
            endpoint_ingress(namespace, hosts[1], portal_url),
        ],
        [
            selectorless_service(namespace, notebook, m.NOTEBOOK_PORT),
            selectorless_service(namespace, endpoint, 8000),
        ],
        [
            endpoint_slice(namespace, notebook, upstream_port, [address]),
            endpoint_slice(namespace, endpoint, upstream_port, [address]),
        ],
    )


def _route(
    path: str, *, host: str = "", path_type: str = "Prefix", service: str = "svc", **meta: Any
) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": path,
                    "pathType": path_type,
                    "backend": {"service": {"name": service, "port": {"number": 80}}},
                }
            ]
        }
    }
    if host:
        rule["host"] = host
    return {
        "metadata": {"name": meta.pop("name", service), "namespace": "ns", **meta},
        "spec": {"rules": [rule]},
    }


# --- routing: a pure function of the objects -------------------------------------------------


def test_notebook_ingress_routes_its_path_on_its_host_with_the_portals_auth() -> None:
    objects = portal_objects(
        NAMESPACE, "http://portal:8000", 9999, hosts=(NOTEBOOK_HOST, ENDPOINT_HOST)
    )
    table = gw.routes_from_objects(*objects)
    path = m.notebook_path(NAMESPACE, NOTEBOOK_ID)
    route = table.match(f"{NOTEBOOK_HOST.upper()}:8890", f"{path}lab/tree")
    assert route is not None
    assert route.source == f"{NAMESPACE}/wl-{NOTEBOOK_ID}"
    assert route.auth == gw.Auth(
        url="http://portal:8000/notebooks/auth/",
        signin="http://portal:8000/notebooks/signin/",
        response_headers=("Authorization",),
        method="GET",
    )
    assert route.backend is not None and route.backend.addresses == (("127.0.0.1", 9999),)
    assert route.upstream_target(f"{path}api/kernels", "a=1") == f"{path}api/kernels?a=1"
    # The Ingress names its host: another host, or another notebook's path, is not routed.
    assert table.match("other.example.test", f"{path}lab") is None
    assert table.match(NOTEBOOK_HOST, m.notebook_path(NAMESPACE, NOTEBOOK_ID + 1)) is None
    assert table.match(NOTEBOOK_HOST, f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}0/") is None


def test_endpoint_ingress_strips_its_prefix_as_rewrite_target_says() -> None:
    objects = portal_objects(
        NAMESPACE, "http://portal:8000", 9999, hosts=(NOTEBOOK_HOST, ENDPOINT_HOST)
    )
    table = gw.routes_from_objects(*objects)
    prefix = m.endpoint_path(NAMESPACE, ENDPOINT_ID)
    route = table.match(ENDPOINT_HOST, f"{prefix}v1/chat/completions")
    assert route is not None and route.pattern is not None
    assert route.auth is not None
    assert route.auth.url == f"http://portal:8000/endpoints/auth/{ENDPOINT_ID}/"
    assert route.auth.signin == ""
    assert route.upstream_target(f"{prefix}v1/chat/completions", "") == "/v1/chat/completions"
    assert route.upstream_target(f"{prefix}v1/models", "x=1") == "/v1/models?x=1"
    assert route.upstream_target(prefix.rstrip("/"), "") == "/"
    # (/|$) ends the id: endpoint 77 is not endpoint 7's.
    assert table.match(ENDPOINT_HOST, m.endpoint_path(NAMESPACE, 77)) is None


def test_longest_path_wins_and_prefix_matches_whole_segments() -> None:
    table = gw.routes_from_objects(
        [_route("/notebooks/", service="all"), _route("/notebooks/ns/1/", service="one")],
        [selectorless_service("ns", "all", 1), selectorless_service("ns", "one", 1)],
    )

    def service(path: str) -> str | None:
        route = table.match("any.host", path)
        return route.backend.service if route and route.backend else None

    assert service("/notebooks/ns/1/lab") == "one"
    assert service("/notebooks/ns/1") == "one"  # Prefix /a/b/ matches /a/b (Kubernetes' rule)
    assert service("/notebooks/ns/10/lab") == "all"  # not a segment of /notebooks/ns/1/
    assert service("/notebooksx") is None
    assert service("/other") is None


def test_exact_paths_come_first_and_the_oldest_ingress_keeps_a_path() -> None:
    table = gw.routes_from_objects(
        [
            _route(
                "/api", path_type="Exact", service="exact", creationTimestamp="2025-01-02T00:00:00Z"
            ),
            _route("/api/", service="newer", creationTimestamp="2025-01-03T00:00:00Z"),
            _route("/api/", service="older", creationTimestamp="2025-01-01T00:00:00Z"),
        ],
        [selectorless_service("ns", s, 1) for s in ("exact", "newer", "older")],
    )
    exact, prefix = table.match("h", "/api"), table.match("h", "/api/x")
    assert exact is not None and exact.backend is not None and exact.backend.service == "exact"
    assert prefix is not None and prefix.backend is not None and prefix.backend.service == "older"
    assert any("older Ingress" in p for p in table.problems)


def test_a_host_of_its_own_hides_the_rules_without_host_and_wildcards_match_one_label() -> None:
    table = gw.routes_from_objects(
        [
            _route("/", service="default"),
            _route("/only/", host="named.test", service="named"),
            _route("/", host="*.wild.test", service="wild"),
        ],
        [selectorless_service("ns", s, 1) for s in ("default", "named", "wild")],
    )

    def service(host: str, path: str) -> str | None:
        route = table.match(host, path)
        return route.backend.service if route and route.backend else None

    assert service("named.test:8890", "/only/x") == "named"
    assert service("named.test", "/elsewhere") is None  # as nginx: its own server, no match
    assert service("a.wild.test", "/") == "wild"
    assert service("a.b.wild.test", "/") == "default"
    assert service("unknown.test", "/x") == "default"


def test_use_regex_makes_every_path_of_the_host_a_case_insensitive_regex() -> None:
    regex = _route("/api/v[0-9]+/", host="h.test", service="api")
    regex["metadata"]["annotations"] = {"nginx.ingress.kubernetes.io/use-regex": "true"}
    plain = _route("/static/", host="h.test", service="static", name="static")
    table = gw.routes_from_objects(
        [regex, plain], [selectorless_service("ns", s, 1) for s in ("api", "static")]
    )
    api = table.match("h.test", "/API/V2/models")
    assert api is not None and api.backend is not None and api.backend.service == "api"
    static = table.match("h.test", "/STATIC/app.js")
    assert static is not None and static.backend is not None and static.backend.service == "static"


def test_backend_port_resolves_to_ready_endpoints_of_the_slices() -> None:
    service = {
        "metadata": {"name": "svc", "namespace": "ns"},
        "spec": {
            "clusterIP": "10.96.0.10",
            "ports": [
                {"name": "metrics", "port": 9100, "targetPort": 9100},
                {"name": "http", "port": 80, "targetPort": "web"},
            ],
        },
    }
    ready = endpoint_slice("ns", "svc", 8888, ["10.251.0.5"])
    unknown = endpoint_slice("ns", "svc", 8888, ["10.251.0.6"], ready=None)
    unready = endpoint_slice("ns", "svc", 8888, ["10.251.0.7"], ready=False)
    other_port = endpoint_slice("ns", "svc", 9100, ["10.251.0.8"])
    other_port["ports"][0]["name"] = "metrics"
    fqdn = endpoint_slice("ns", "svc", 8888, ["pod.example.test"])
    fqdn["addressType"] = "FQDN"
    other_service = endpoint_slice("ns", "other", 8888, ["10.251.0.9"])
    table = gw.routes_from_objects(
        [_route("/")], [service], [ready, unknown, unready, other_port, fqdn, other_service]
    )
    route = table.match("h", "/")
    assert route is not None and route.backend is not None
    # Pod IPs and the slices' port for the Service port's name; never the ClusterIP.
    assert route.backend.addresses == (("10.251.0.5", 8888), ("10.251.0.6", 8888))


def simulated_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {"kubesim.io/node": "fake"}}}


def test_endpoints_on_simulated_nodes_are_noted() -> None:
    fake = endpoint_slice("ns", "svc", 8888, ["10.244.0.5"])
    fake["endpoints"][0]["nodeName"] = "h100-0"
    real = endpoint_slice("ns", "svc", 8888, ["10.251.1.5"])
    real["endpoints"][0]["nodeName"] = "real-0"
    real["metadata"]["name"] = "svc-real"
    nodes = [
        simulated_node("h100-0"),
        {"metadata": {"name": "real-0", "annotations": {"kubesim.io/node": "real"}}},
    ]
    route = gw.routes_from_objects(
        [_route("/")], [selectorless_service("ns", "svc", 8888)], [fake, real], nodes
    ).match("h", "/")
    assert route is not None and route.backend is not None
    assert route.backend.addresses == (("10.244.0.5", 8888), ("10.251.1.5", 8888))
    assert route.backend.simulated == {("10.244.0.5", 8888)}


@pytest.mark.parametrize(
    ("services", "slices", "problem"),
    [
        ([], [], "There is no Service ns/svc."),
        (
            [{"metadata": {"name": "svc", "namespace": "ns"}, "spec": {"ports": [{"port": 81}]}}],
            [],
            "no port 80",
        ),
        ([selectorless_service("ns", "svc", 1)], [], "no ready endpoint"),
        (
            [selectorless_service("ns", "svc", 1)],
            [endpoint_slice("ns", "svc", 1, ["10.0.0.1"], ready=False)],
            "no ready endpoint",
        ),
    ],
)
def test_a_backend_without_endpoints_says_why(
    services: list[dict[str, Any]], slices: list[dict[str, Any]], problem: str
) -> None:
    route = gw.routes_from_objects([_route("/")], services, slices).match("h", "/")
    assert route is not None and route.backend is not None
    assert route.backend.addresses == ()
    assert problem in route.backend.problem


def test_annotations_set_the_limits() -> None:
    ingress = _route("/")
    ingress["metadata"]["annotations"] = {
        "nginx.ingress.kubernetes.io/proxy-body-size": "64m",
        "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
        "nginx.ingress.kubernetes.io/proxy-connect-timeout": "2",
    }
    route = gw.routes_from_objects([ingress]).match("h", "/")
    assert route is not None
    assert route.limits == gw.Limits(
        connect_timeout=2, read_timeout=3600, send_timeout=60, max_body=64 << 20
    )
    assert gw.parse_size("0") is None and gw.parse_size("8k") == 8192


TRAVERSALS = [
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/../{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/%2e%2e/{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/%2E%2E/{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/..%2f{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/..;/{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/.;/lab",
    f"/notebooks/{NAMESPACE}%2f{NOTEBOOK_ID}/",
    f"/notebooks//{NAMESPACE}/{NOTEBOOK_ID}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/./lab",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/..",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/..\\{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/%5c..%5c{NOTEBOOK_ID + 1}/",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/%00",
    f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/%zz",
    f"http://{NOTEBOOK_HOST}/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/",
    "*",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_paths_that_are_not_normalised_are_refused(target: str) -> None:
    assert gw.target_refusal(target)


@pytest.mark.parametrize(
    "target",
    [
        f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/",
        f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/api/contents/my%20file.ipynb?content=1&_=1700",
        f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/files/a.b/..c/x...y",
        f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/api/kernels/1f2e/channels?session_id=ab-c",
        f"/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/lab?redirect=/a/../b",  # the query is not a path
        "/",
    ],
)
def test_normalised_paths_pass(target: str) -> None:
    assert gw.target_refusal(target) == ""


# --- the proxy, end to end -------------------------------------------------------------------


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with serving(Upstream()) as server:
        yield server


@pytest.fixture
def portal() -> Iterator[FakePortal]:
    with serving(FakePortal()) as server:
        yield server


@contextmanager
def running_gateway(**kw: Any) -> Iterator[gw.Gateway]:
    gateway, thread = gw.start(0, **kw)
    try:
        yield gateway
    finally:
        gateway.shutdown()
        gateway.server_close()
        thread.join(timeout=10)


@dataclass
class Site:
    """A notebook and an endpoint served through a gateway by the upstream."""

    gateway: gw.Gateway
    upstream: Upstream
    portal: FakePortal
    namespace: str
    notebook_host: str = NOTEBOOK_HOST
    endpoint_host: str = ENDPOINT_HOST

    @property
    def port(self) -> int:
        return int(self.gateway.server_address[1])

    @property
    def nb_host(self) -> str:
        # As a browser sends it: the gateway's port is in the Host header, not in the Ingress.
        return f"{self.notebook_host}:{self.port}"

    @property
    def nb_path(self) -> str:
        return m.notebook_path(self.namespace, NOTEBOOK_ID)

    @property
    def ep_path(self) -> str:
        return m.endpoint_path(self.namespace, ENDPOINT_ID)

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def get(
        self, path: str, *, cookie: str = "", host: str = "", **headers: str
    ) -> tuple[http.client.HTTPResponse, bytes]:
        conn = self.connect()
        try:
            if cookie:
                headers["Cookie"] = cookie
            conn.request("GET", path, headers={"Host": host or self.nb_host, **headers})
            response = conn.getresponse()
            return response, response.read()
        finally:
            conn.close()


@pytest.fixture
def site(upstream: Upstream, portal: FakePortal) -> Iterator[Site]:
    with running_gateway() as gateway:
        objects = portal_objects(
            NAMESPACE, portal.url, upstream.port, hosts=(NOTEBOOK_HOST, ENDPOINT_HOST)
        )
        gateway.publish(gw.routes_from_objects(*objects))
        yield Site(gateway, upstream, portal, NAMESPACE)


def _headers(entry: dict[str, Any]) -> dict[str, str]:
    return {k.lower(): v for k, v in entry["headers"]}


def check_authorised_get_is_proxied_with_the_token(site: Site) -> None:
    target = f"{site.nb_path}lab/tree?reset=1"
    # A token the browser brings itself never reaches Jupyter: the portal's replaces it.
    response, body = site.get(target, cookie="session=alice", Authorization="token forged")
    assert response.status == 200, body
    seen = json.loads(body)
    upstream_headers = {k.lower(): v for k, v in seen["headers"]}
    assert seen["path"] == target
    assert upstream_headers["authorization"] == f"token {NOTEBOOK_TOKEN}"
    assert upstream_headers["host"] == site.nb_host
    assert upstream_headers["x-forwarded-host"] == site.nb_host
    assert upstream_headers["x-forwarded-proto"] == "http"
    assert upstream_headers["x-forwarded-for"] == "127.0.0.1"
    assert upstream_headers["cookie"] == "session=alice"
    # The upstream's cookies and the portal's reach the browser; the token does not.
    cookies = response.msg.get_all("Set-Cookie") or []
    assert "upstream=1; Path=/" in cookies
    assert "nb-access=renewed; Path=/notebooks/; HttpOnly" in cookies
    assert NOTEBOOK_TOKEN not in str(response.msg)
    asked = _headers(site.portal.seen()[-1])
    assert site.portal.seen()[-1]["method"] == "GET"
    assert site.portal.seen()[-1]["path"] == "/notebooks/auth/"
    assert asked["x-original-url"] == f"http://{site.nb_host}{target}"
    assert asked["x-original-method"] == "GET"
    assert asked["x-forwarded-host"] == site.nb_host
    assert asked["x-forwarded-proto"] == "http"
    assert asked["cookie"] == "session=alice"
    assert asked["authorization"] == "token forged"


def check_unauthenticated_goes_to_signin_and_outsider_is_refused(site: Site) -> None:
    before = len(site.upstream.seen())
    target = f"{site.nb_path}lab?a=b"
    response, _ = site.get(target)
    assert response.status == 302
    location = response.getheader("Location") or ""
    assert location.startswith(f"{site.portal.url}/notebooks/signin/?rd=")
    assert parse_qs(urlsplit(location).query)["rd"] == [f"http://{site.nb_host}{target}"]
    response, body = site.get(target, cookie="session=bob")
    assert response.status == 403
    assert b"refused" in body
    assert len(site.upstream.seen()) == before


def check_websocket_echoes_through_the_proxy(site: Site) -> None:
    path = f"{site.nb_path}api/kernels/k1/channels?session_id=s1"
    sock, status, _, rest = open_websocket(site.port, site.nb_host, path, cookie="session=alice")
    with sock:
        assert status == 101
        ws = WebSocket(sock, rest)
        for text in ("hello", "x" * 70000):
            ws.send(text)
            assert ws.receive() == (1, f"echo:{text}".encode())
        ws.close()
        assert ws.receive()[0] == 8
    upgrade = next(e for e in reversed(site.upstream.seen()) if e["path"] == path)
    assert _headers(upgrade)["authorization"] == f"token {NOTEBOOK_TOKEN}"
    asked = _headers(site.portal.seen()[-1])
    assert asked["x-original-url"] == f"http://{site.nb_host}{path}"
    # Without access the upgrade is not made: the sign-in, as for any request.
    sock, status, headers, _ = open_websocket(site.port, site.nb_host, path)
    with sock:
        assert status == 302 and "signin" in headers["location"]


def check_put_body_arrives(site: Site) -> None:
    body = os.urandom(300_000)
    conn = site.connect()
    try:
        conn.request(
            "PUT",
            f"{site.nb_path}api/contents/work/a.ipynb",
            body=body,
            headers={"Host": site.nb_host, "Cookie": "session=alice"},
        )
        response = conn.getresponse()
        seen = json.loads(response.read())
        assert response.status == 200
        assert seen["method"] == "PUT"
        assert seen["body_length"] == len(body)
        assert seen["body_sha256"] == hashlib.sha256(body).hexdigest()
        # The same connection again, with a body sent in chunks.
        conn.request(
            "PATCH",
            f"{site.nb_path}api/contents/work/a.ipynb",
            body=iter([b"abc", b"", b"defgh"]),
            headers={"Host": site.nb_host, "Cookie": "session=alice"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        seen = json.loads(response.read())
        assert (response.status, seen["method"], seen["body_length"]) == (200, "PATCH", 8)
        assert seen["body_sha256"] == hashlib.sha256(b"abcdefgh").hexdigest()
    finally:
        conn.close()


def check_each_request_on_a_kept_connection_is_authorised_again(site: Site) -> None:
    conn = site.connect()
    try:
        answers = []
        sockets = []
        for cookie in ("session=alice", "session=bob", "", "session=alice"):
            headers = {"Host": site.nb_host}
            if cookie:
                headers["Cookie"] = cookie
            asked = len(site.portal.seen())
            conn.request("GET", f"{site.nb_path}api/status", headers=headers)
            response = conn.getresponse()
            response.read()
            answers.append(response.status)
            sockets.append(conn.sock)
            assert len(site.portal.seen()) == asked + 1
            assert _headers(site.portal.seen()[-1]).get("cookie", "") == cookie
        assert answers == [200, 403, 302, 200]
        assert all(s is sockets[0] for s in sockets)  # one connection throughout
    finally:
        conn.close()


def raw_status(site: Site, target: str) -> int:
    with socket.create_connection(("127.0.0.1", site.port), timeout=10) as sock:
        head = f"GET {target} HTTP/1.1\r\nHost: {site.nb_host}\r\nCookie: session=alice\r\n\r\n"
        sock.sendall(head.encode())
        return read_head(sock)[0]


def check_traversals_are_refused_before_auth_and_upstream(site: Site) -> None:
    asked, served = len(site.portal.seen()), len(site.upstream.seen())
    assert {target: raw_status(site, target) for target in TRAVERSALS} == dict.fromkeys(
        TRAVERSALS, 400
    )
    assert len(site.portal.seen()) == asked
    assert len(site.upstream.seen()) == served
    assert raw_status(site, f"{site.nb_path}lab") == 200


def test_authorised_get_is_proxied_with_the_token(site: Site) -> None:
    check_authorised_get_is_proxied_with_the_token(site)


def test_unauthenticated_goes_to_signin_and_outsider_is_refused(site: Site) -> None:
    check_unauthenticated_goes_to_signin_and_outsider_is_refused(site)


def test_websocket_echoes_through_the_proxy(site: Site) -> None:
    check_websocket_echoes_through_the_proxy(site)


def test_put_body_arrives(site: Site) -> None:
    check_put_body_arrives(site)


def test_each_request_on_a_kept_connection_is_authorised_again(site: Site) -> None:
    check_each_request_on_a_kept_connection_is_authorised_again(site)


def test_traversals_are_refused_before_auth_and_upstream(site: Site) -> None:
    check_traversals_are_refused_before_auth_and_upstream(site)


def test_response_is_streamed_not_buffered(site: Site) -> None:
    conn = site.connect()
    try:
        conn.request(
            "GET",
            f"{site.nb_path}stream",
            headers={"Host": site.nb_host, "Cookie": "session=alice"},
        )
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        # The upstream holds its second chunk until the first has come through.
        assert response.read1(100) == b"first\n"
        site.upstream.release.set()
        assert response.read() == b"second\n"
    finally:
        conn.close()


def test_body_ended_by_the_upstream_closing_is_chunked_and_the_connection_kept(
    site: Site,
) -> None:
    conn = site.connect()
    try:
        headers = {"Host": site.nb_host, "Cookie": "session=alice"}
        conn.request("GET", f"{site.nb_path}unframed", headers=headers)
        response = conn.getresponse()
        assert response.getheader("Transfer-Encoding") == "chunked"
        assert response.read() == b"until the end"
        conn.request("HEAD", f"{site.nb_path}api/status", headers=headers)
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"")
        assert int(response.getheader("Content-Length") or 0) > 0
        conn.request("GET", f"{site.nb_path}api/status", headers=headers)
        assert conn.getresponse().status == 200
    finally:
        conn.close()


@pytest.mark.parametrize(
    "head",
    [
        "Transfer-Encoding: chunked\r\nContent-Length: 3",  # request smuggling's favourite
        "Content-Length: 3\r\nContent-Length: 4",
        "Content-Length: -1",
        "X-Folded: a\r\n b",
        "Host: second.example.test",
    ],
)
def test_ambiguous_requests_are_refused_before_auth(site: Site, head: str) -> None:
    with socket.create_connection(("127.0.0.1", site.port), timeout=10) as sock:
        sock.sendall(
            f"POST {site.nb_path}api/x HTTP/1.1\r\nHost: {site.nb_host}\r\n"
            f"Cookie: session=alice\r\n{head}\r\n\r\nabc".encode()
        )
        assert read_head(sock)[0] == 400
    assert site.portal.seen() == []


def test_endpoint_call_with_a_key_reaches_the_server_without_the_prefix(site: Site) -> None:
    conn = site.connect()
    host = f"{ENDPOINT_HOST}:{site.port}"
    try:
        conn.request(
            "POST",
            f"{site.ep_path}v1/completions?stream=false",
            body=b'{"prompt": "hi"}',
            headers={"Host": host, "Authorization": f"Bearer {ENDPOINT_KEY}"},
        )
        response = conn.getresponse()
        seen = json.loads(response.read())
        assert response.status == 200
        assert (seen["method"], seen["path"], seen["body_length"]) == (
            "POST",
            "/v1/completions?stream=false",
            16,
        )
        assert _headers(seen)["authorization"] == f"Bearer {ENDPOINT_KEY}"
        asked = site.portal.seen()[-1]
        assert asked["path"] == f"/endpoints/auth/{ENDPOINT_ID}/"
        assert asked["method"] == "GET"
        assert _headers(asked)["x-original-method"] == "POST"
        # A wrong key: 401 with the portal's challenge (no sign-in page for API clients).
        conn.request(
            "POST",
            f"{site.ep_path}v1/completions",
            body=b"{}",
            headers={"Host": host, "Authorization": "Bearer wrong"},
        )
        response = conn.getresponse()
        response.read()
        assert response.status == 401
        assert response.getheader("WWW-Authenticate") == 'Bearer realm="gpupaas endpoint"'
    finally:
        conn.close()


def test_fifty_concurrent_connections_are_served_at_once(site: Site) -> None:
    statuses: list[int] = []

    def call() -> None:
        response, _ = site.get(f"{site.nb_path}barrier", cookie="session=alice")
        statuses.append(response.status)

    threads = [threading.Thread(target=call) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # The upstream answers none until all fifty are in flight at once.
    assert statuses == [200] * 50


def test_body_over_the_limit_is_refused_before_auth(site: Site) -> None:
    asked = len(site.portal.seen())
    with socket.create_connection(("127.0.0.1", site.port), timeout=10) as sock:
        sock.sendall(
            f"PUT {site.nb_path}api/contents/big HTTP/1.1\r\nHost: {site.nb_host}\r\n"
            f"Cookie: session=alice\r\nContent-Length: {2 << 20}\r\n\r\n".encode()
        )
        assert read_head(sock)[0] == 413
    assert len(site.portal.seen()) == asked


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_upstream_that_refuses_is_a_502_and_no_endpoint_a_503(
    upstream: Upstream, portal: FakePortal
) -> None:
    ingresses, services, _ = portal_objects(
        NAMESPACE, portal.url, upstream.port, hosts=(NOTEBOOK_HOST, ENDPOINT_HOST)
    )
    dead = [endpoint_slice(NAMESPACE, f"wl-{NOTEBOOK_ID}", _closed_port(), ["127.0.0.1"])]
    with running_gateway() as gateway:
        site = Site(gateway, upstream, portal, NAMESPACE)
        gateway.publish(gw.routes_from_objects(ingresses, services, dead))
        response, body = site.get(f"{site.nb_path}lab", cookie="session=alice")
        assert response.status == 502
        assert b"127.0.0.1:" in body and b"refused" in body.lower()
        gateway.publish(gw.routes_from_objects(ingresses, services, []))
        response, body = site.get(f"{site.nb_path}lab", cookie="session=alice")
        assert response.status == 503
        assert b"no ready endpoint" in body
        # Unauthorised people learn nothing about the backend: the portal is asked first.
        response, _ = site.get(f"{site.nb_path}lab", cookie="session=bob")
        assert response.status == 403


def test_portal_that_cannot_be_reached_is_a_502(upstream: Upstream) -> None:
    ingresses, services, slices = portal_objects(
        NAMESPACE,
        f"http://127.0.0.1:{_closed_port()}",
        upstream.port,
        hosts=(NOTEBOOK_HOST, ENDPOINT_HOST),
    )
    with running_gateway() as gateway:
        gateway.publish(gw.routes_from_objects(ingresses, services, slices))
        site = Site(gateway, upstream, FakePortal(), NAMESPACE)
        response, body = site.get(f"{site.nb_path}lab", cookie="session=alice")
        assert response.status == 502
        assert b"portal cannot be reached" in body
        assert upstream.seen() == []


def test_unrouted_host_or_path_is_a_404(site: Site) -> None:
    assert site.get("/elsewhere/", cookie="session=alice")[0].status == 404
    assert site.get(site.nb_path, host=f"other.test:{site.port}")[0].status == 404


def test_portal_mode_answers_notebook_paths_with_the_stand_in(portal: FakePortal) -> None:
    with running_gateway(portal_url=portal.url) as gateway:
        assert gateway.auth_url == f"{portal.url}/notebooks/auth/"
        site = Site(gateway, Upstream(), portal, NAMESPACE)
        response, body = site.get(f"{site.nb_path}lab", cookie="session=alice")
        assert response.status == 200
        assert b"<h1>Notebook</h1>" in body
        assert b"handed over this notebook's token" in body
        assert NOTEBOOK_TOKEN.encode() not in body
        assert site.get(f"{site.nb_path}lab")[0].status == 302
        assert site.get(f"{site.nb_path}lab", cookie="session=bob")[0].status == 403


def test_stand_in_answers_for_pods_on_simulated_nodes_only(
    upstream: Upstream, portal: FakePortal
) -> None:
    ingresses, services, _ = portal_objects(
        NAMESPACE, portal.url, upstream.port, hosts=(NOTEBOOK_HOST, ENDPOINT_HOST)
    )
    on_fake = endpoint_slice(NAMESPACE, f"wl-{NOTEBOOK_ID}", _closed_port(), ["127.0.0.1"])
    on_fake["endpoints"][0]["nodeName"] = "h100-0"
    nodes = [simulated_node("h100-0"), {"metadata": {"name": "real-0"}}]
    with running_gateway(stand_in=True) as gateway:
        gateway.publish(gw.routes_from_objects(ingresses, services, [on_fake], nodes))
        site = Site(gateway, upstream, portal, NAMESPACE)
        response, body = site.get(f"{site.nb_path}lab", cookie="session=alice")
        assert response.status == 200
        assert b"handed over this notebook's token" in body
        assert f"{NAMESPACE}/wl-{NOTEBOOK_ID}:80".encode() in body
        # Authorised first, as any request.
        assert site.get(f"{site.nb_path}lab", cookie="session=bob")[0].status == 403
        # On a node that is not simulated the endpoint is tried, and its silence is a 502.
        on_fake["endpoints"][0]["nodeName"] = "real-0"
        gateway.publish(gw.routes_from_objects(ingresses, services, [on_fake], nodes))
        assert site.get(f"{site.nb_path}lab", cookie="session=alice")[0].status == 502


# --- on the simulated cluster ----------------------------------------------------------------


def local_address() -> str:
    """An IPv4 address of this machine's own that is not loopback: the API server refuses
    loopback addresses in an EndpointSlice (skipped on a machine without one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # UDP: nothing is sent, a route is chosen
            address = str(probe.getsockname()[0])
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("this machine has no IPv4 address but loopback for an EndpointSlice")
    return address


@pytest.mark.kubesim
def test_gateway_routes_by_the_clusters_ingresses_and_endpoint_slices(
    kubesim: ks.Kubesim,
    kube_api_client: client.ApiClient,
    k8s_namespace: str,
    portal: FakePortal,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    hosts = (f"nb-{suffix}.example.test", f"ep-{suffix}.example.test")
    with serving(Upstream(address=local_address())) as upstream:
        ingresses, services, slices = portal_objects(
            k8s_namespace, portal.url, upstream.port, hosts=hosts, address=upstream.address
        )
        apply_manifests(kube_api_client, [*services, *slices, *ingresses])
        kubeconfig = admin_kubeconfig(kubesim)
        with running_gateway(kubeconfig=kubeconfig, refresh_seconds=0.5) as gateway:
            run_on_the_cluster(
                Site(gateway, upstream, portal, k8s_namespace, *hosts), kube_api_client
            )


def run_on_the_cluster(site: Site, kube_api_client: client.ApiClient) -> None:
    def routed() -> bool:
        route = site.gateway.refresh().match(site.nb_host, site.nb_path)
        return route is not None and route.backend is not None and bool(route.backend.addresses)

    wait_for(routed, timeout=20)
    check_authorised_get_is_proxied_with_the_token(site)
    check_unauthenticated_goes_to_signin_and_outsider_is_refused(site)
    check_websocket_echoes_through_the_proxy(site)
    check_put_body_arrives(site)
    check_each_request_on_a_kept_connection_is_authorised_again(site)
    check_traversals_are_refused_before_auth_and_upstream(site)
    # The endpoint's Ingress: its prefix stripped on the way to the server.
    response, body = site.get(
        f"{site.ep_path}v1/models",
        host=f"{site.endpoint_host}:{site.port}",
        Authorization=f"Bearer {ENDPOINT_KEY}",
    )
    assert response.status == 200
    assert json.loads(body)["path"] == "/v1/models"
    # The endpoint marked unready: the gateway's next listing takes it out.
    client.DiscoveryV1Api(kube_api_client).patch_namespaced_endpoint_slice(
        f"wl-{NOTEBOOK_ID}-manual",
        site.namespace,
        {"endpoints": [{"addresses": [site.upstream.address], "conditions": {"ready": False}}]},
    )

    def unready() -> bool:
        return site.get(f"{site.nb_path}lab", cookie="session=alice")[0].status == 503

    wait_for(unready, timeout=20)
