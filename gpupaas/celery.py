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

    # Every periodic task of the platform, one row each: (name, every N seconds, task).
    schedule = [
        ("heartbeat", settings.HEARTBEAT_INTERVAL_SECONDS, "apps.common.health.heartbeat"),
        ("reconcile", settings.ORCHESTRATION_RECONCILE_SECONDS, "orchestration.reconcile_all"),
        (
            "status sync",
            settings.ORCHESTRATION_STATUS_SYNC_SECONDS,
            "orchestration.status_sync_all",
        ),
        ("inventory", settings.ORCHESTRATION_INVENTORY_SECONDS, "orchestration.inventory_sync_all"),
        ("telemetry ingest", settings.TELEMETRY_INGEST_SECONDS, "telemetry.ingest"),
        ("node health", settings.TELEMETRY_NODE_HEALTH_SECONDS, "telemetry.node_health"),
        ("scheduling cycle", settings.SCHEDULING_CYCLE_SECONDS, "scheduling.run_cycle"),
    ]
    for name, seconds, task in schedule:
        sender.add_periodic_task(float(seconds), sender.signature(task), name=name)
