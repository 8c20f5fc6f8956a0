"""Celery tasks of reservations: thin, they call one service."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from apps.common import taskqueue
from apps.reservations.services import reservation_boundaries_apply


@shared_task(
    name=taskqueue.RESERVATION_BOUNDARIES.name,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def reservation_boundaries() -> dict[str, int]:
    # Nothing is lost on failure: the next pass finds the same windows unacted on.
    opened, closed = reservation_boundaries_apply()
    return {"opened": opened, "closed": closed}
