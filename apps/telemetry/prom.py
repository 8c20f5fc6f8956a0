"""The one adapter that talks to Prometheus's HTTP API (instant and range queries)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
from django.conf import settings


class PrometheusUnavailable(RuntimeError):
    """Prometheus could not be reached or refused the query."""


class PrometheusClient:
    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        if not url:
            raise PrometheusUnavailable("PROMETHEUS_URL is not set.")
        self.url = url.rstrip("/")
        self._http = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            response = self._http.get(f"{self.url}{path}", params=params)
        except httpx.HTTPError as exc:
            raise PrometheusUnavailable(f"Prometheus at {self.url}: {exc}") from exc
        try:
            body = response.json()
        except ValueError as exc:
            raise PrometheusUnavailable(
                f"Prometheus answered {response.status_code} without JSON."
            ) from exc
        if body.get("status") != "success":
            raise PrometheusUnavailable(f"Prometheus: {body.get('error') or response.text[:200]}")
        return body["data"]

    def query(self, promql: str, at: datetime | None = None) -> list[dict[str, Any]]:
        """An instant query; the ``result`` list of a vector."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        data = self._get("/api/v1/query", params)
        return list(data.get("result") or [])

    def query_range(
        self, promql: str, start: datetime, end: datetime, step_seconds: float
    ) -> list[dict[str, Any]]:
        """A range query; the ``result`` list of a matrix."""
        data = self._get(
            "/api/v1/query_range",
            {
                "query": promql,
                "start": f"{start.timestamp():.3f}",
                "end": f"{end.timestamp():.3f}",
                "step": f"{max(1.0, step_seconds):g}",
            },
        )
        return list(data.get("result") or [])


def default_client() -> PrometheusClient:
    return PrometheusClient(
        settings.PROMETHEUS_URL, timeout=float(settings.TELEMETRY_QUERY_TIMEOUT_SECONDS)
    )
