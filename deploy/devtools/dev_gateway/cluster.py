"""The cluster's objects the routes come from, listed every few seconds."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deploy.devtools.dev_gateway.routes import (
    DEFAULT_LIMITS,
    Limits,
    Route,
    RouteTable,
    routes_from_objects,
)

log = logging.getLogger("gpupaas.dev_gateway")


class ClusterRoutes:
    """Lists the cluster's Ingresses, Services, EndpointSlices and Nodes through the official client
    every ``interval`` seconds and hands the route table built from them to ``publish``. A
    kubeconfig that is not there yet (the cluster still starting) is waited for."""

    def __init__(
        self,
        kubeconfig: Path,
        publish: Callable[[RouteTable], None],
        *,
        interval: float = 2.0,
        defaults: Limits = DEFAULT_LIMITS,
        fallback: Sequence[Route] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.publish = publish
        self.interval = interval
        self.defaults = defaults
        self.fallback = tuple(fallback)
        self._api: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._last_error = ""

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import config

            self._api = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    def _list(self, api: Any, method: str) -> list[dict[str, Any]]:
        response = getattr(api, method)(_preload_content=False, _request_timeout=10)
        try:
            return list(json.loads(response.data).get("items") or [])
        finally:
            response.release_conn()

    def refresh(self) -> RouteTable:
        """List the objects now, publish the new table and return it (raises if the cluster
        cannot be read; the table published before stays)."""
        from kubernetes import client

        with self._lock:
            api = self._client()
            ingresses = self._list(client.NetworkingV1Api(api), "list_ingress_for_all_namespaces")
            services = self._list(client.CoreV1Api(api), "list_service_for_all_namespaces")
            slices = self._list(
                client.DiscoveryV1Api(api), "list_endpoint_slice_for_all_namespaces"
            )
            nodes = self._list(client.CoreV1Api(api), "list_node")
            table = routes_from_objects(
                ingresses, services, slices, nodes, defaults=self.defaults, fallback=self.fallback
            )
            self.publish(table)
            return table

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.kubeconfig.exists():
                    self.refresh()
                    if self._last_error:
                        log.info("reading the cluster again")
                    self._last_error = ""
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
                if problem != self._last_error:
                    log.warning("cannot read the cluster's Ingresses: %s", problem)
                self._last_error = problem
                self._api = None
            self._stop.wait(self.interval)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gateway-routes", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self._api is not None:
            self._api.close()
