"""Run the node agent: ``python -m apps.telemetry.agent --port 9400``.

Serves ``/metrics`` (dcgm-exporter's metric names and labels, from NVML) and ``/health.json``
(the node's GPU inventory and health: count, model, memory, driver, ECC, XID, temperature, and a
verdict). Prometheus scrapes ``/metrics``; the portal's node-health task reads the same metrics
from Prometheus and shows the report in the admin (telemetry → node health reports).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from apps.telemetry.agent.collector import Collector
from apps.telemetry.agent.nvml import NvmlUnavailable, PynvmlBackend
from apps.telemetry.agent.pods import CgroupPodResolver, NoPods, PodResolver, cluster_directory


def make_server(collector: Collector, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            content_type = "text/plain; version=0.0.4; charset=utf-8"
            try:
                if path == "/metrics":
                    body, status = collector.exposition().encode(), 200
                elif path == "/health.json":
                    node = collector.health()
                    report = {
                        "hostname": node.hostname,
                        "gpu_count": len(node.gpus),
                        "models": node.models,
                        "driver_version": node.driver_version,
                        "verdict": node.verdict,
                        "problems": node.problems,
                        "gpus": [g.as_dict() for g in node.gpus],
                    }
                    body, status = json.dumps(report, indent=2).encode(), 200
                    content_type = "application/json"
                elif path == "/healthz":
                    body, status = b"ok\n", 200
                else:
                    body, status = b"not found\n", 404
            except Exception as exc:  # NVML errors mid-flight: answer, keep serving
                body, status = f"collection failed: {exc}\n".encode(), 503
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m apps.telemetry.agent")
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - scraped from the cluster
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument("--hostname", default=os.environ.get("NODE_NAME") or socket.gethostname())
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="name pods from this kubeconfig (default: in-cluster when KUBERNETES_SERVICE_HOST)",
    )
    args = parser.parse_args(argv)
    try:
        nvml = PynvmlBackend()
    except NvmlUnavailable as exc:
        print(f"gpupaas agent: {exc}", file=sys.stderr)
        return 2
    resolver: PodResolver = NoPods()
    if args.kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"):
        resolver = CgroupPodResolver(cluster_directory(args.hostname, args.kubeconfig))
    server = make_server(Collector(nvml, args.hostname, resolver), args.host, args.port)
    print(f"gpupaas agent: {nvml.device_count()} GPUs, serving :{args.port}/metrics", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        nvml.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
