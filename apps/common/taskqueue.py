"""Queue Celery work after a commit without ever failing the request that caused it."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from gpupaas.celery import app

log = logging.getLogger(__name__)


def enqueue(task_name: str, *args: Any) -> None:
    """Send a task by name; if the broker is down, log it — the periodic passes catch up."""
    try:
        app.send_task(task_name, args=list(args), retry=False)
    except Exception as exc:  # any broker failure must not break the caller
        log.warning("could not queue %s%s: %s", task_name, args, exc)


def enqueue_on_commit(task_name: str, *args: Any) -> None:
    transaction.on_commit(lambda: enqueue(task_name, *args))
