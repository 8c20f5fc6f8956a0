"""Thin Celery task: the scaling loop's pass (periodic, gpupaas/celery.py)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from apps.common import taskqueue
from apps.serving import autoscaling

log = logging.getLogger(__name__)


@shared_task(name=taskqueue.SERVING_AUTOSCALE.name, ignore_result=True)
def autoscale() -> None:
    if not settings.TELEMETRY_ENABLED:
        return
    result = autoscaling.autoscale_pass()
    for problem in result.errors or []:
        log.warning("scaling loop: %s", problem)


@shared_task(name=taskqueue.SERVING_SAMPLES_PURGE.name, ignore_result=True)
def samples_purge() -> None:
    before = timezone.now() - timedelta(days=settings.SERVING_SAMPLE_RETENTION_DAYS)
    autoscaling.endpoint_samples_purge(before=before)
