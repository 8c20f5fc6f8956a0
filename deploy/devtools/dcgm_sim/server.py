"""The exporter process: reads the cluster through the API server and serves ``/metrics`` and
``/healthz``."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from deploy.devtools.dcgm_sim.cluster import Assignments, Node, node_from_k8s, pod_from_k8s
from deploy.devtools.dcgm_sim.exporters import (
    DEFAULT_EXPORTER,
    EXPORTER_POD_LABEL,
    EXPORTERS,
    ExporterProfile,
)
from deploy.devtools.dcgm_sim.metrics import render


class Simulator:
    """Reads the cluster (nodes cached for ``node_ttl`` seconds) and renders a scrape."""

    def __init__(
        self,
        kubeconfig: str,
        *,
        node_ttl: float = 30.0,
        exporter: ExporterProfile | None = None,
    ) -> None:
        from kubernetes import client, config

        self._exporter = exporter or EXPORTERS[DEFAULT_EXPORTER]
        self._exporter_pods: dict[str, str] = {}
        self._api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        self._node_ttl = node_ttl
        self._nodes: dict[str, Node] = {}
        self._nodes_at = 0.0
        self._assignments = Assignments()
        self._lock = threading.Lock()

    def _list(self, call: Any, **kwargs: Any) -> list[dict[str, Any]]:
        response = call(_preload_content=False, _request_timeout=10, **kwargs)
        return list(json.loads(response.data).get("items") or [])

    def scrape(self, now: float | None = None) -> str:
        with self._lock:
            moment = time.time() if now is None else now
            if not self._nodes or moment - self._nodes_at > self._node_ttl:
                raw = self._list(self._api.list_node, label_selector="nvidia.com/gpu.present=true")
                self._nodes = {n.name: n for n in map(node_from_k8s, raw) if n is not None}
                self._nodes_at = moment
            if self._exporter.host_is_exporter_pod:
                key, value = EXPORTER_POD_LABEL
                exporters = self._list(
                    self._api.list_pod_for_all_namespaces, label_selector=f"{key}={value}"
                )
                self._exporter_pods = {
                    str(p["spec"]["nodeName"]): str(p["metadata"]["name"])
                    for p in exporters
                    if (p.get("spec") or {}).get("nodeName")
                }
            raw_pods = self._list(
                self._api.list_pod_for_all_namespaces, field_selector="status.phase=Running"
            )
            pods = [p for p in map(pod_from_k8s, raw_pods) if p is not None]
            held = self._assignments.update(self._nodes, pods)
            nodes = [self._nodes[name] for name in sorted(self._nodes)]
            return render(
                nodes,
                pods,
                held,
                moment,
                exporter=self._exporter,
                exporter_pods=self._exporter_pods,
            )


def serve(simulator: Simulator, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/healthz":
                body, status = b"ok\n", 200
            elif self.path.split("?")[0] == "/metrics":
                try:
                    body, status = simulator.scrape().encode(), 200
                except Exception as exc:  # report, keep serving
                    body, status = f"scrape failed: {exc}\n".encode(), 503
            else:
                body, status = b"not found\n", 404
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.dcgm_sim")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument(
        "--exporter",
        choices=sorted(EXPORTERS),
        default=DEFAULT_EXPORTER,
        help="the exporter variant to imitate (labels and metric families)",
    )
    parser.add_argument(
        "--unmeasured",
        action="append",
        default=None,
        metavar="NODE_PATTERN",
        help="nodes whose GPUs export no utilisation (dcgm-exporter variants; default h100-3)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for the kubeconfig file (kubesim writes it once it is up)",
    )
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while not Path(args.kubeconfig).exists():
        if time.monotonic() > deadline:
            print(f"dcgm-sim: {args.kubeconfig} did not appear", file=sys.stderr)
            return 1
        time.sleep(1)
    exporter = EXPORTERS[args.exporter]
    if args.unmeasured is not None and exporter.name != "agent":
        exporter = replace(exporter, unmeasured=tuple(args.unmeasured))
    server = serve(Simulator(args.kubeconfig, exporter=exporter), args.host, args.port)
    print(f"dcgm-sim listening on http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
