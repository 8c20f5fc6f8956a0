"""Celery tasks of quotas: thin, they call one service."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from apps.common import taskqueue
from apps.quotas.services import quota_grant_boundaries_apply


@shared_task(
    name=taskqueue.QUOTA_GRANT_BOUNDARIES.name,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
    ignore_result=True,
)
def quota_grant_boundaries() -> dict[str, int]:
    # Nothing is lost on failure: the next pass finds the same grants unacted on.
    started, ended = quota_grant_boundaries_apply()
    return {"started": started, "ended": ended}
