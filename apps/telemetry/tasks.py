"""Thin Celery tasks: the ingestion pass and node health refresh (periodic, gpupaas/celery.py)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from apps.common import taskqueue
from apps.telemetry import services
from apps.telemetry.models import IngestCursor
from apps.telemetry.prom import PrometheusUnavailable
from apps.telemetry.services import spend

log = logging.getLogger(__name__)


@shared_task(name=taskqueue.TELEMETRY_INGEST.name, ignore_result=True)
def ingest() -> None:
    if not settings.TELEMETRY_ENABLED:
        return
    try:
        services.telemetry_ingest()
    except PrometheusUnavailable as exc:
        # The window is not advanced: the next tick accounts for it (up to its cap).
        log.warning("telemetry ingestion skipped: %s", exc)
        IngestCursor.objects.update_or_create(pk=1, defaults={"last_error": str(exc)[:500]})


@shared_task(name=taskqueue.TELEMETRY_NODE_HEALTH.name, ignore_result=True)
def node_health() -> None:
    if not settings.TELEMETRY_ENABLED:
        return
    try:
        services.node_health_refresh()
    except PrometheusUnavailable as exc:
        log.warning("node health refresh skipped: %s", exc)


@shared_task(name=taskqueue.BUDGET_SPEND_REFRESH.name, ignore_result=True)
def budget_spend_refresh() -> None:
    """Month-to-date spend and run rate of teams with a budget (the database only: it runs
    whether or not Prometheus is configured)."""
    spend.budget_spend_refresh()
