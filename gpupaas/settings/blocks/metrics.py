"""The portal's own /metrics: who may read it."""

from __future__ import annotations

from gpupaas.settings.env import env_optional_str

PROMETHEUS_EXPORT_MIGRATIONS = False
# /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`; with no token, only callers on
# this host (loopback). Everyone else gets 404.
METRICS_TOKEN = env_optional_str("METRICS_TOKEN") or ""
