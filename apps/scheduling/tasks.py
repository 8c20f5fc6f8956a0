"""Celery tasks of the scheduler: thin, they call one service."""

from __future__ import annotations

import logging
from typing import Any

from celery import Task, shared_task
from django.db import OperationalError

from apps.common import taskqueue
from apps.scheduling.services import gpu_fault_pass, node_drain_pass, scheduling_cycle_run

log = logging.getLogger(__name__)


class _CycleTask(Task):
    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        # Nothing is lost: the next cycle (beat, or the next submission) decides again.
        log.error("scheduling cycle %s failed: %s", task_id, exc)


@shared_task(
    name=taskqueue.SCHEDULING_CYCLE.name,
    base=_CycleTask,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
    ignore_result=True,
)
def run_cycle() -> dict[str, int]:
    run = scheduling_cycle_run()
    return {
        "admitted": len(run.admitted),
        "preempted": len(run.preempted),
        "requeued": len(run.requeued),
        "rejected": len(run.rejected),
        "waiting": run.waiting,
    }


@shared_task(
    name=taskqueue.NODE_DRAIN_PASS.name,
    base=_CycleTask,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    retry_backoff_max=30,
    max_retries=3,
    ignore_result=True,
)
def run_node_drain_pass() -> dict[str, int]:
    """Work off nodes drained for maintenance and off GPUs that fell off the bus."""
    return {"moved": len(node_drain_pass()), "off_failed_gpus": len(gpu_fault_pass())}
