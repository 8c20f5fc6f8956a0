"""The Celery app. Periodic schedules are declared here, in one place."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.dev")

app = Celery("gpupaas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _schedule(sender: Celery, **_: object) -> None:
    from django.conf import settings

    # Every periodic task of the platform, one line each.
    sender.add_periodic_task(
        float(settings.HEARTBEAT_INTERVAL_SECONDS),
        sender.signature("gpupaas.ops.heartbeat"),
        name="heartbeat",
    )
