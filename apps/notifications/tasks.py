"""Thin Celery tasks: deliver one notice by one channel; the periodic sweep; the daily digest."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.app.task import Task

from apps.common import taskqueue
from apps.notifications import services

log = logging.getLogger(__name__)


class DeliverTask(Task):
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        log.error("notice delivery %s failed: %s", args, exc)


@shared_task(bind=True, base=DeliverTask, name=taskqueue.NOTICE_DELIVER.name, ignore_result=True)
def notice_deliver(self: Task, delivery_id: int) -> None:
    try:
        services.delivery_attempt(delivery_id=delivery_id)
    except services.RetryLater as exc:
        # The row holds the attempt count and the next attempt's time; the sweep requeues
        # it should this retry be lost.
        raise self.retry(countdown=exc.countdown, max_retries=None, exc=exc) from exc


@shared_task(name=taskqueue.NOTICE_SWEEP.name, ignore_result=True)
def notice_sweep() -> None:
    services.deliveries_sweep()


@shared_task(name=taskqueue.NOTICE_DIGEST.name, ignore_result=True)
def notice_digest() -> None:
    services.notice_digests_send()
