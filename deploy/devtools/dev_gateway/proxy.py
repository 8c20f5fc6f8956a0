"""The gateway: one connection's exchanges with the portal's auth check and the upstream,
retries on the next upstream, upgrades spliced both ways."""

from __future__ import annotations

import contextlib
import html
import http
import http.cookiejar
import logging
import secrets
import selectors
import socket
import socketserver
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from deploy.devtools.dev_gateway.cluster import ClusterRoutes
from deploy.devtools.dev_gateway.routes import (
    DEFAULT_LIMITS,
    Auth,
    Backend,
    Limits,
    Route,
    RouteTable,
    portal_stand_in_route,
)
from deploy.devtools.dev_gateway.wire import (
    CHUNK,
    DRAIN_SECONDS,
    FORWARDING,
    NEXT_UPSTREAM_TRIES,
    _body,
    _end_to_end,
    _Framing,
    _head_bytes,
    _Malformed,
    _Message,
    _phrase,
    _read_message,
    _Reader,
    _request_framing,
    _response_framing,
    _valid_host,
    target_refusal,
)

log = logging.getLogger("gpupaas.dev_gateway")


@dataclass
class _Verdict:
    status: int  # the portal's answer; 0: it could not be asked
    upstream_headers: list[tuple[str, str]] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)
    www_authenticate: list[str] = field(default_factory=list)
    problem: str = ""


def _refusing_jar() -> http.cookiejar.CookieJar:
    """A cookie jar that keeps nothing: the portal's cookies belong to each browser, never to
    the gateway's client (which would hand one person's cookie to the next)."""
    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


class Gateway(socketserver.ThreadingTCPServer):
    """The gateway's listening socket; each connection is served in a thread of its own."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        port: int,
        *,
        bind: str = "127.0.0.1",
        kubeconfig: Path | str | None = None,
        portal_url: str = "",
        auth_url: str = "",
        stand_in: bool = False,
        refresh_seconds: float = 2.0,
        limits: Limits = DEFAULT_LIMITS,
        client_timeout: float = 60.0,
        keepalive_timeout: float = 75.0,
    ) -> None:
        super().__init__((bind, port), _Handler)
        fallback: list[Route] = []
        if portal_url or auth_url:
            route = portal_stand_in_route(portal_url, auth_url=auth_url)
            fallback.append(replace(route, limits=limits))
        self.stand_in = stand_in
        self.client_timeout = client_timeout
        self.keepalive_timeout = keepalive_timeout
        self.table = RouteTable(fallback=tuple(fallback))
        self.client = httpx.Client(
            timeout=10, follow_redirects=False, trust_env=False, cookies=_refusing_jar()
        )
        self.routes: ClusterRoutes | None = None
        if kubeconfig is not None:
            self.routes = ClusterRoutes(
                Path(kubeconfig),
                self.publish,
                interval=refresh_seconds,
                defaults=limits,
                fallback=fallback,
            )
        self._turns: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    @property
    def auth_url(self) -> str:
        """Where the stand-in route of ``--portal`` asks ('' without it)."""
        auth = self.table.fallback[0].auth if self.table.fallback else None
        return auth.url if auth else ""

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def publish(self, table: RouteTable) -> None:
        """Serve by this table from now on (the cluster reader calls it after each listing)."""
        for problem in set(table.problems) - set(self.table.problems):
            log.warning("%s", problem)
        self.table = table

    def refresh(self) -> RouteTable:
        """Read the cluster now (the table is refreshed in the background anyway)."""
        if self.routes is None:
            return self.table
        return self.routes.refresh()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        if self.routes is not None:
            self.routes.start()
        super().serve_forever(poll_interval)

    def server_close(self) -> None:
        super().server_close()
        if self.routes is not None:
            self.routes.stop()
        self.client.close()

    def candidates(self, backend: Backend) -> list[tuple[str, int]]:
        """The backend's addresses to try, round robin (ingress-nginx's default balancing);
        with the stand-in on, those on simulated nodes are left out."""
        with self._lock:
            turn = self._turns[backend.name]
            self._turns[backend.name] = turn + 1
        addresses = list(backend.addresses)
        if self.stand_in:
            addresses = [a for a in addresses if a not in backend.simulated]
        if addresses:
            turn %= len(addresses)
            addresses = addresses[turn:] + addresses[:turn]
        return addresses[:NEXT_UPSTREAM_TRIES]


class _Handler(socketserver.BaseRequestHandler):
    server: Gateway

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            _Connection(self.server, sock, self.client_address).serve()
        except OSError:
            pass
        except Exception:
            log.exception("serving %s", self.client_address)


class _Done(Exception):
    """The connection is to be closed (after what was already sent)."""


class _Connection:
    """One client connection: its requests one after the other, each routed and authorised
    on its own (nothing rides on an earlier request's authorisation)."""

    def __init__(self, gateway: Gateway, sock: socket.socket, peer: Any) -> None:
        self.gateway = gateway
        self.sock = sock
        self.reader = _Reader(sock)
        self.peer = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.port = int(gateway.server_address[1])
        self.status = 0  # what the request now answered got, for the log
        self.note = ""

    def serve(self) -> None:
        timeout = self.gateway.client_timeout
        while True:
            self.sock.settimeout(timeout)
            try:
                request = _read_message(self.reader, request=True)
            except _Malformed as exc:
                self._page(exc.status, "Bad request", html.escape(str(exc)), close=True)
                return
            except (TimeoutError, ConnectionError):
                return
            if request is None:
                return
            started = time.monotonic()
            self.status = 0
            self.note = ""
            try:
                keep = self._exchange(request)
            except _Done:
                keep = False
            except _Malformed as exc:
                self._try_page(exc.status, "Bad request", html.escape(str(exc)))
                keep = False
            except (TimeoutError, ConnectionError, OSError) as exc:
                self.note = self.note or f"{type(exc).__name__}: {exc}"
                keep = False
            log.info(
                "%s %s %s %s -> %s %s(%.0f ms)",
                self.peer,
                request.start[0],
                request.get("Host") or "-",
                request.start[1][:200],
                self.status or "-",
                f"{self.note} " if self.note else "",
                (time.monotonic() - started) * 1000,
            )
            if not keep:
                return
            timeout = self.gateway.keepalive_timeout

    # --- one request ---

    def _exchange(self, request: _Message) -> bool:
        """Answer one request; whether the connection may carry another."""
        _, target, version = request.start
        hosts = request.all("Host")
        if (
            len(hosts) > 1
            or (hosts and not _valid_host(hosts[0]))
            or (version == "HTTP/1.1" and not hosts)
        ):
            self._page(400, "Bad request", "The request needs one valid Host header.", close=True)
            return False
        host = hosts[0] if hosts else f"127.0.0.1:{self.port}"
        if problem := target_refusal(target):
            # Before routing and before the portal is asked about it.
            self._page(400, "Bad request", html.escape(problem), close=True)
            return False
        framing = _request_framing(request)
        client_keep = version == "HTTP/1.1" and "close" not in request.tokens("Connection")
        # An answer of the gateway's own leaves a body unread: the connection ends with it.
        keep = client_keep and framing.kind == "none"
        path, _, query = target.partition("?")
        route = self.gateway.table.match(host, path)
        if route is None:
            self._page(404, "Not found", "No Ingress routes this host and path.", close=not keep)
            return keep
        self.note = route.source
        limit = route.limits.max_body
        if limit is not None and framing.kind == "length" and framing.length > limit:
            self._page(413, "Content too large", f"The body may hold {limit} bytes.", close=True)
            return False
        original = f"http://{host}{target}"
        cookies: list[str] = []
        upstream_headers: list[tuple[str, str]] = []
        if route.auth is not None:
            verdict = self._authorise(route.auth, request, original, host)
            self.note += f" auth {verdict.status or verdict.problem}"
            if verdict.status == 0:
                self._page(
                    502,
                    "The portal cannot be reached",
                    f"Asking {html.escape(route.auth.url)}: {html.escape(verdict.problem)}",
                    close=not keep,
                )
                return keep
            if verdict.status == 401:
                if route.auth.signin:
                    self._redirect(_signin_url(route.auth.signin, original), close=not keep)
                else:
                    self._page(
                        401,
                        "Authorization required",
                        "The portal did not let this request through.",
                        headers=[("WWW-Authenticate", v) for v in verdict.www_authenticate],
                        close=not keep,
                    )
                return keep
            if not 200 <= verdict.status < 300:
                self._page(403, "Forbidden", "The portal refused access.", close=not keep)
                return keep
            cookies = verdict.cookies
            upstream_headers = verdict.upstream_headers
        backend = route.backend
        if backend is None:
            return self._stand_in(request, route, upstream_headers, cookies, keep=keep)
        candidates = self.gateway.candidates(backend)
        if not candidates and backend.addresses:  # all on simulated nodes, with the stand-in on
            return self._stand_in(request, route, upstream_headers, cookies, keep=keep)
        upstream, address, problem = self._connect(candidates, route.limits)
        if upstream is None:
            if not candidates:
                self._page(503, "Service unavailable", html.escape(backend.problem), close=not keep)
                return keep
            self._page(
                502,
                "Bad gateway",
                f"No endpoint of {html.escape(backend.name)} answered: {html.escape(problem)}",
                close=not keep,
            )
            return keep
        self.note = f"{self.note} -> {address[0]}:{address[1]}"
        removed = {h.lower() for h in (route.auth.response_headers if route.auth else ())}
        with upstream:
            return self._proxy(
                request,
                route,
                upstream,
                host=host,
                target=route.upstream_target(path, query),
                framing=framing,
                removed=removed,
                upstream_headers=upstream_headers,
                cookies=cookies,
                keep=client_keep,
            )

    def _authorise(self, auth: Auth, request: _Message, original: str, host: str) -> _Verdict:
        """ingress-nginx's auth subrequest: the request's own headers (no body), with what it
        was (X-Original-URL, X-Original-Method, …) and who asked (X-Forwarded-*, X-Real-IP)."""
        method, target, _ = request.start
        headers = [
            (n, v)
            for n, v in _end_to_end(request)
            if n.lower() not in FORWARDING and n.lower() not in {"host", "expect"}
        ]
        headers += [
            ("X-Original-URL", original),
            ("X-Original-Method", method),
            ("X-Original-URI", target),
            ("X-Scheme", "http"),
            ("X-Forwarded-Proto", "http"),
            ("X-Forwarded-Host", host),
            ("X-Forwarded-For", self.peer),
            ("X-Real-IP", self.peer),
            ("X-Sent-From", "nginx-ingress-controller"),
            ("X-Auth-Request-Redirect", target),
            ("X-Request-ID", secrets.token_hex(16)),
        ]
        try:
            answer = self.gateway.client.request(
                auth.method or method, auth.url, headers=httpx.Headers(headers)
            )
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: the gateway is closing
            return _Verdict(0, problem=f"{type(exc).__name__}: {exc}")
        verdict = _Verdict(answer.status_code)
        if 200 <= answer.status_code < 300:
            for name in auth.response_headers:
                if (value := answer.headers.get(name)) is not None:
                    verdict.upstream_headers.append((name, value))
            verdict.cookies = answer.headers.get_list("Set-Cookie")
        elif answer.status_code == 401:
            verdict.www_authenticate = answer.headers.get_list("WWW-Authenticate")
        return verdict

    def _connect(
        self, candidates: Sequence[tuple[str, int]], limits: Limits
    ) -> tuple[socket.socket | None, tuple[str, int], str]:
        problems = []
        for address in candidates:
            try:
                upstream = socket.create_connection(address, timeout=limits.connect_timeout)
            except OSError as exc:
                problems.append(f"{address[0]}:{address[1]}: {exc or type(exc).__name__}")
                continue
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return upstream, address, ""
        return None, ("", 0), "; ".join(problems)

    def _proxy(
        self,
        request: _Message,
        route: Route,
        upstream: socket.socket,
        *,
        host: str,
        target: str,
        framing: _Framing,
        removed: set[str],
        upstream_headers: list[tuple[str, str]],
        cookies: list[str],
        keep: bool,
    ) -> bool:
        method, _, version = request.start
        upgrade = request.get("Upgrade") if "upgrade" in request.tokens("Connection") else None
        headers = [("Host", host)]
        headers += [
            (n, v)
            for n, v in _end_to_end(request)
            if n.lower() not in FORWARDING
            and n.lower() not in removed
            and n.lower() not in {"host", "expect"}
        ]
        headers += upstream_headers
        headers += [
            ("X-Request-ID", secrets.token_hex(16)),
            ("X-Real-IP", self.peer),
            ("X-Forwarded-For", self.peer),
            ("X-Forwarded-Host", host),
            ("X-Forwarded-Port", str(self.port)),
            ("X-Forwarded-Proto", "http"),
            ("X-Forwarded-Scheme", "http"),
            ("X-Scheme", "http"),
        ]
        if upgrade is not None:
            headers += [("Connection", "upgrade"), ("Upgrade", upgrade)]
        else:
            headers.append(("Connection", "close"))
        if framing.kind == "length":
            headers.append(("Content-Length", str(framing.length)))
        elif framing.kind == "chunked":
            headers.append(("Transfer-Encoding", "chunked"))
        upstream.settimeout(route.limits.send_timeout)
        upstream_reader = _Reader(upstream)
        try:
            upstream.sendall(_head_bytes(f"{method} {target} HTTP/1.1", headers))
            if framing.kind != "none" and "100-continue" in request.tokens("Expect"):
                self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            self._send_body(upstream, framing, route.limits.max_body)
        except OSError:
            # The upstream may have answered before it read everything: its answer is passed
            # on, and the connection ends with it (the rest of the body is still unread).
            keep = False
        upstream.settimeout(route.limits.read_timeout)
        try:
            while True:
                response = _read_message(upstream_reader, request=False)
                if response is None:
                    raise ConnectionError("the upstream closed the connection without an answer")
                status = int(response.start[1])
                if not 100 <= status < 200 or status == 101:
                    break
        except TimeoutError:
            self._page(504, "Gateway timeout", "The upstream did not answer in time.", close=True)
            return False
        except (_Malformed, ConnectionError, OSError) as exc:
            self._page(
                502, "Bad gateway", f"The upstream's answer: {html.escape(str(exc))}", close=True
            )
            return False
        self.status = status
        if status == 101 and upgrade is None:
            self._page(502, "Bad gateway", "The upstream switched protocols unasked.", close=True)
            return False
        out = [
            (n, v)
            for n, v in _end_to_end(response)
            if not (n.lower() == "content-length" and status == 101)
        ]
        out += [("Set-Cookie", c) for c in cookies]
        if status == 101 and upgrade is not None:
            out += [("Connection", "upgrade"), ("Upgrade", response.get("Upgrade") or upgrade)]
            self.sock.sendall(_head_bytes(f"HTTP/1.1 101 {response.start[2]}", out))
            _splice(self.sock, self.reader, upstream, upstream_reader, route.limits.read_timeout)
            return False
        try:
            body_framing = _response_framing(response, method)
        except _Malformed as exc:
            self._page(502, "Bad gateway", html.escape(str(exc)), close=True)
            return False
        keep = keep and upgrade is None and version == "HTTP/1.1"
        if body_framing.kind == "length" or (
            body_framing.kind == "none" and response.get("Content-Length") is not None
        ):
            out.append(("Content-Length", response.get("Content-Length") or "0"))
        elif body_framing.kind != "none":
            if version == "HTTP/1.1":
                out.append(("Transfer-Encoding", "chunked"))
            else:
                keep = False
        if not keep:
            out.append(("Connection", "close"))
        self.sock.settimeout(route.limits.send_timeout)
        self.sock.sendall(_head_bytes(f"HTTP/1.1 {status} {response.start[2]}", out))
        chunked = body_framing.kind in {"chunked", "close"} and version == "HTTP/1.1"
        try:
            for data in _body(upstream_reader, body_framing):
                self.sock.sendall(b"%x\r\n%b\r\n" % (len(data), data) if chunked else data)
        except (_Malformed, ConnectionError, TimeoutError) as exc:
            # Mid-body there is no other answer to give: the client sees the connection end.
            self.note += f" upstream body: {exc}"
            raise _Done from None
        if chunked:
            self.sock.sendall(b"0\r\n\r\n")
        return keep

    def _send_body(self, upstream: socket.socket, framing: _Framing, limit: int | None) -> None:
        """Stream the request's body to the upstream. A client that stops sending ends the
        connection (_Done); an upstream that stops reading raises OSError."""
        total = 0
        body = _body(self.reader, framing)
        while True:
            try:
                data = next(body, None)
            except (TimeoutError, ConnectionError) as exc:
                self.note += f" client body: {exc}"
                raise _Done from None
            if data is None:
                break
            total += len(data)
            if limit is not None and total > limit:
                self._page(
                    413, "Content too large", f"The body may hold {limit} bytes.", close=True
                )
                raise _Done
            upstream.sendall(
                b"%x\r\n%b\r\n" % (len(data), data) if framing.kind == "chunked" else data
            )
        if framing.kind == "chunked":
            upstream.sendall(b"0\r\n\r\n")

    # --- answers of the gateway's own ---

    def _stand_in(
        self,
        request: _Message,
        route: Route,
        upstream_headers: Sequence[tuple[str, str]],
        cookies: list[str],
        *,
        keep: bool,
    ) -> bool:
        token = {n.lower(): v for n, v in upstream_headers}.get("authorization", "")
        path = request.start[1].split("?")[0]
        title = "Notebook" if path.startswith("/notebooks/") else "Stand-in"
        body = (
            "<p>This stand-in for JupyterLab answers at <code>"
            f"{html.escape(path)}</code>.</p>"
            "<p id='token-state'>"
            + (
                "The portal handed over this notebook's token."
                if token.startswith("token ")
                else "The portal sent no token."
            )
            + "</p>"
        )
        if route.backend is not None:
            body += (
                f"<p id='backend'>{html.escape(route.backend.name)} is served by pods on "
                "simulated nodes, which run no containers.</p>"
            )
        self.note += " stand-in"
        self._page(200, title, body, cookies=cookies, close=not keep)
        return keep

    def _redirect(self, location: str, *, close: bool) -> None:
        self._send(302, [("Location", location), ("Content-Length", "0")], b"", close=close)

    def _page(
        self,
        status: int,
        title: str,
        body: str,
        *,
        cookies: Sequence[str] = (),
        headers: Sequence[tuple[str, str]] = (),
        close: bool,
    ) -> None:
        data = (
            f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"</head><body><main><h1>{title}</h1>{body}</main></body></html>"
        ).encode()
        out = [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
            *headers,
            *(("Set-Cookie", c) for c in cookies),
        ]
        self._send(status, out, data, close=close)

    def _try_page(self, status: int, title: str, body: str) -> None:
        with contextlib.suppress(OSError):
            self._page(status, title, body, close=True)

    def _send(
        self, status: int, headers: list[tuple[str, str]], data: bytes, *, close: bool
    ) -> None:
        self.status = status
        if close:
            headers = [*headers, ("Connection", "close")]
        self.sock.sendall(_head_bytes(f"HTTP/1.1 {status} {_phrase(status)}", headers) + data)


def _signin_url(signin: str, original: str) -> str:
    """ingress-nginx's auth-signin redirect: ``rd`` is the original URL, unless the sign-in
    URL already says where to return."""
    if "rd=" in signin:
        return signin
    return f"{signin}{'&' if '?' in signin else '?'}{urlencode({'rd': original})}"


def _splice(
    client: socket.socket,
    client_reader: _Reader,
    upstream: socket.socket,
    upstream_reader: _Reader,
    idle: float,
) -> None:
    """Copy an upgraded connection both ways until both sides have closed (once one has, the
    other gets DRAIN_SECONDS to finish) or nothing moves for ``idle`` seconds."""
    with contextlib.suppress(OSError):
        if data := client_reader.take_buffered():
            upstream.sendall(data)
        if data := upstream_reader.take_buffered():
            client.sendall(data)
    peer = {client: upstream, upstream: client}
    client.settimeout(idle)
    upstream.settimeout(idle)
    with selectors.DefaultSelector() as selector:
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)
        deadline = time.monotonic() + idle
        open_sides = 2
        while open_sides:
            ready = selector.select(timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                return
            for key, _ in ready:
                source: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = source.recv(CHUNK)
                except OSError:
                    data = b""
                if data:
                    try:
                        peer[source].sendall(data)
                    except OSError:
                        return
                    if open_sides == 2:
                        deadline = time.monotonic() + idle
                    continue
                selector.unregister(source)
                open_sides -= 1
                with contextlib.suppress(OSError):
                    peer[source].shutdown(socket.SHUT_WR)
                deadline = min(deadline, time.monotonic() + DRAIN_SECONDS)
