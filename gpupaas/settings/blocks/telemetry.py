"""Telemetry: DCGM metrics from Prometheus (on when PROMETHEUS_URL is given), accounting and
budgets' spend passes, node health and the idle policy's defaults."""

from __future__ import annotations

from gpupaas.settings.env import env_bool, env_int, env_optional_str

# On when PROMETHEUS_URL is given (or TELEMETRY_ENABLED=true). Idle durations are defaults for
# GPU classes and teams without their own idle policy (admin → telemetry → idle policies).
PROMETHEUS_URL = env_optional_str("PROMETHEUS_URL") or ""
TELEMETRY_ENABLED = env_bool("TELEMETRY_ENABLED", bool(PROMETHEUS_URL))
TELEMETRY_INGEST_SECONDS = env_int("TELEMETRY_INGEST_SECONDS", 60, minimum=1)
# Beat interval of the month-to-date spend and run rate of teams with a budget.
BUDGET_SPEND_SECONDS = env_int("BUDGET_SPEND_SECONDS", 300, minimum=10)
# Warn the leads and admins when the month's forecast (today's run rate to the month's end)
# reaches a budget threshold, not only once the spend does.
BUDGET_FORECAST_WARNINGS = env_bool("BUDGET_FORECAST_WARNINGS", True)
TELEMETRY_NODE_HEALTH_SECONDS = env_int("TELEMETRY_NODE_HEALTH_SECONDS", 300, minimum=10)
TELEMETRY_QUERY_TIMEOUT_SECONDS = env_int("TELEMETRY_QUERY_TIMEOUT_SECONDS", 10, minimum=1)
TELEMETRY_IDLE_THRESHOLD_PERCENT = env_int("TELEMETRY_IDLE_THRESHOLD_PERCENT", 5, minimum=0)
TELEMETRY_IDLE_WARN_SECONDS = env_int("TELEMETRY_IDLE_WARN_SECONDS", 20 * 60, minimum=1)
TELEMETRY_IDLE_SUSPEND_SECONDS = env_int("TELEMETRY_IDLE_SUSPEND_SECONDS", 30 * 60, minimum=1)
TELEMETRY_IDLE_FLAG_SECONDS = env_int("TELEMETRY_IDLE_FLAG_SECONDS", 60 * 60, minimum=1)
