"""Traefik, the development cluster's Gateway API implementation, on kubesim: it programs the
Gateway, serves the routes the portal writes (an HTTPRoute with an ExtensionRef filter naming
a forwardAuth Middleware), and the authorisation it asks about is the route it serves.

Two notebooks' routes, each asking a recording auth server at its own address (as the
portal's routes ask ``/notebooks/auth/<id>/``). Every traversal encoding is sent on the first
notebook's prefix; for each, either Traefik refuses it before asking, or the route that asks
is named in the auth address, and the forwarded URI names that notebook or none (the portal
refuses a URI that names no notebook or another one). No backend runs (the Service has no
ready endpoint): an allowed request ends at Traefik's 503, after the authorisation.
"""

from __future__ import annotations

import base64
import http.server
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config
from kubernetes.client.rest import ApiException

from apps.orchestration.notebook_access import _PATH_RE
from deploy.devtools import traefik
from deploy.devtools.kubesim import Kubesim
from tests.plugins.kubesim import admin_kubeconfig
from tests.traversals import TRAVERSALS
from tests.waiting import wait_for

pytestmark = pytest.mark.kubesim

NAMESPACE = "team-gw"
HOST = "notebooks.gw.test"
IDS = (101, 102)
ENCODINGS = tuple(f"/notebooks/team-gw/101/{t}102/" for t in TRAVERSALS)


class Recorder(http.server.BaseHTTPRequestHandler):
    asked: list[tuple[int, str]] = []

    def do_GET(self) -> None:
        match = re.fullmatch(r"/auth/(\d+)/", self.path)
        route = int(match.group(1)) if match else -1
        Recorder.asked.append((route, self.headers.get("X-Forwarded-Uri", "")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def auth_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _routes(api_client: Any, auth_url: str) -> None:
    """The two notebooks' routes, asking ``auth_url`` (made once per cluster, the session's
    tests share it; a later test points the Middlewares at its own auth server)."""
    core = k8s.CoreV1Api(api_client)
    custom = k8s.CustomObjectsApi(api_client)
    labels = {"app.kubernetes.io/managed-by": "gpupaas"}
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE, "labels": labels}})
    except ApiException as exc:
        if exc.status != 409:
            raise
        for workload_id in IDS:
            custom.patch_namespaced_custom_object(
                "traefik.io",
                "v1alpha1",
                NAMESPACE,
                "middlewares",
                f"wl-{workload_id}-auth",
                {"spec": {"forwardAuth": {"address": f"{auth_url}/auth/{workload_id}/"}}},
            )
        return
    for workload_id in IDS:
        name = f"wl-{workload_id}"
        core.create_namespaced_service(
            NAMESPACE,
            {
                "metadata": {"name": name},
                "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8888}]},
            },
        )
        custom.create_namespaced_custom_object(
            "traefik.io",
            "v1alpha1",
            NAMESPACE,
            "middlewares",
            {
                "apiVersion": "traefik.io/v1alpha1",
                "kind": "Middleware",
                "metadata": {"name": f"{name}-auth"},
                "spec": {"forwardAuth": {"address": f"{auth_url}/auth/{workload_id}/"}},
            },
        )
        custom.create_namespaced_custom_object(
            "gateway.networking.k8s.io",
            "v1",
            NAMESPACE,
            "httproutes",
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": name},
                "spec": {
                    "parentRefs": [
                        {"name": traefik.GATEWAY_NAME, "namespace": traefik.GATEWAY_NAMESPACE}
                    ],
                    "hostnames": [HOST],
                    "rules": [
                        {
                            "matches": [
                                {
                                    "path": {
                                        "type": "PathPrefix",
                                        "value": f"/notebooks/{NAMESPACE}/{workload_id}",
                                    }
                                }
                            ],
                            "filters": [
                                {
                                    "type": "ExtensionRef",
                                    "extensionRef": {
                                        "group": "traefik.io",
                                        "kind": "Middleware",
                                        "name": f"{name}-auth",
                                    },
                                }
                            ],
                            "backendRefs": [{"name": name, "port": 80}],
                        }
                    ],
                },
            },
        )


def _asked_through(send: Callable[[], httpx.Response]) -> httpx.Response:
    """Sends until Traefik serves the route with this test's auth server (before, a route not
    yet loaded is its 404, a Middleware still naming an earlier test's server its 500), then
    once more with the authorisation recorded afresh."""

    def through() -> httpx.Response | None:
        Recorder.asked.clear()
        answer = send()
        return answer if Recorder.asked else None

    wait_for(through, timeout=30)
    Recorder.asked.clear()
    return send()


def test_traefik_asks_the_route_it_serves_about_every_traversal(
    kubesim: Kubesim, auth_server: str, tmp_path: Path
) -> None:
    with traefik.running(admin_kubeconfig(kubesim), tmp_path) as proxy:
        api_client = config.new_client_from_config(config_file=str(admin_kubeconfig(kubesim)))
        try:
            _routes(api_client, auth_server)
            wait_for(
                lambda: all(
                    traefik.route_conditions(api_client, NAMESPACE, f"wl-{i}").get("Accepted")
                    == "True"
                    for i in IDS
                ),
                timeout=30,
            )
        finally:
            api_client.close()
        with httpx.Client(base_url=proxy.url, headers={"Host": HOST}, timeout=10) as web:
            # Both routes are served, each after its own authorisation.
            for workload_id in IDS:
                answer = _asked_through(
                    lambda i=workload_id: web.get(f"/notebooks/{NAMESPACE}/{i}/lab")
                )
                assert answer.status_code == 503  # authorised; no ready backend
                assert Recorder.asked == [
                    (workload_id, f"/notebooks/{NAMESPACE}/{workload_id}/lab")
                ]
            outcomes = []
            for raw in ENCODINGS:
                Recorder.asked.clear()
                # Sent as written: httpx would normalise the dots itself.
                request = web.build_request("GET", "/")
                request.url = request.url.copy_with(raw_path=raw.encode())
                status = web.send(request).status_code
                time.sleep(0.05)
                asked = list(Recorder.asked)
                outcomes.append((raw, status, asked))
                for route, forwarded in asked:
                    named = _PATH_RE.match(forwarded)
                    # The portal decides on the route's notebook: the URI must name it or none.
                    assert named is None or int(named["id"]) == route, (raw, route, forwarded)
                if not asked:
                    assert status in (400, 404), (raw, status)
            print(outcomes)


def test_tls_ends_at_the_gateway_with_the_certificate_its_listener_names(
    kubesim: Kubesim, auth_server: str, tmp_path: Path
) -> None:
    """The Gateway's HTTPS listener terminates TLS with the certificate of the Secret it
    references (certificateRefs): a client that trusts only that certificate reaches the route
    by its host name (SNI), and the portal's authorisation is asked as over HTTP. Until Traefik
    has read the Secret it answers with a certificate of its own, which that client refuses:
    the test waits for the Secret's certificate (a loaded machine takes a while)."""
    tls_port = traefik.free_port()
    with traefik.running(
        admin_kubeconfig(kubesim), tmp_path, tls_port=tls_port, tls_hostnames=(HOST,)
    ):
        api_client = config.new_client_from_config(config_file=str(admin_kubeconfig(kubesim)))
        try:
            _routes(api_client, auth_server)
            secret = k8s.CoreV1Api(api_client).read_namespaced_secret(
                traefik.TLS_SECRET, traefik.GATEWAY_NAMESPACE
            )
        finally:
            api_client.close()
        pem = base64.b64decode(secret.data["tls.crt"])
        certificate = tmp_path / "gateway.crt"
        certificate.write_bytes(pem)
        url = f"https://127.0.0.1:{tls_port}/notebooks/{NAMESPACE}/101/lab"
        sni = {"sni_hostname": HOST}
        refused: list[str] = []
        with httpx.Client(
            verify=ssl.create_default_context(cafile=str(certificate)), timeout=10, trust_env=False
        ) as web:

            def send() -> httpx.Response:
                try:
                    return web.get(url, headers={"Host": HOST}, extensions=sni)
                except httpx.ConnectError as exc:  # another certificate, not yet the Secret's
                    refused.append(str(exc))
                    return httpx.Response(599)

            answer = _asked_through(send)
            assert answer.status_code == 503, refused[-3:]  # authorised; no ready backend
            assert Recorder.asked == [(101, f"/notebooks/{NAMESPACE}/101/lab")]
            assert answer.extensions["http_version"] in (b"HTTP/1.1", b"HTTP/2")
        # The certificate served for the host is the Secret's, byte for byte.
        assert _served_for(tls_port) == ssl.PEM_cert_to_DER_cert(pem.decode())
        # A client that does not trust that certificate is not let through (nothing falls back
        # to plain HTTP or to a certificate it would accept).
        with (
            httpx.Client(timeout=10, trust_env=False) as untrusting,
            pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
        ):
            untrusting.get(url, headers={"Host": HOST}, extensions=sni)


def _served_for(port: int) -> bytes:
    """The certificate Traefik presents for ``HOST`` (by SNI), as DER."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=HOST) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der
