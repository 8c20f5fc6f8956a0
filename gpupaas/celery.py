"""The Celery app. Periodic schedules are declared here, in one place."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.dev")

app = Celery("gpupaas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The platform heartbeat lives with the health checks, outside the domain apps.
app.autodiscover_tasks(["apps.common"], related_name="health")


# Archived logs are kept LOG_ARCHIVE_RETENTION_DAYS; the purge runs hourly.
LOG_ARCHIVE_PURGE_SECONDS = 3600
# The daily digest of routine notices covers the day before; a run sends each user at most one
# per day, so the hourly pass sends it early each day and retries what failed.
NOTICE_DIGEST_SECONDS = 3600


@app.on_after_finalize.connect
def _schedule(sender: Celery, **_: object) -> None:
    from django.conf import settings

    from apps.common import taskqueue

    # Every periodic task of the platform, one row each: (name, every N seconds, task).
    schedule = [
        ("heartbeat", settings.HEARTBEAT_INTERVAL_SECONDS, taskqueue.HEARTBEAT),
        ("reconcile", settings.ORCHESTRATION_RECONCILE_SECONDS, taskqueue.RECONCILE_ALL),
        ("status sync", settings.ORCHESTRATION_STATUS_SYNC_SECONDS, taskqueue.STATUS_SYNC_ALL),
        ("inventory", settings.ORCHESTRATION_INVENTORY_SECONDS, taskqueue.INVENTORY_SYNC_ALL),
        (
            "trial metrics",
            settings.ORCHESTRATION_TRIAL_METRICS_SECONDS,
            taskqueue.TRIAL_METRICS_ALL,
        ),
        ("drift repair", settings.ORCHESTRATION_DRIFT_REPAIR_SECONDS, taskqueue.DRIFT_REPAIR_ALL),
        ("log archive purge", LOG_ARCHIVE_PURGE_SECONDS, taskqueue.LOG_ARCHIVE_PURGE),
        ("telemetry ingest", settings.TELEMETRY_INGEST_SECONDS, taskqueue.TELEMETRY_INGEST),
        ("node health", settings.TELEMETRY_NODE_HEALTH_SECONDS, taskqueue.TELEMETRY_NODE_HEALTH),
        ("budget spend", settings.BUDGET_SPEND_SECONDS, taskqueue.BUDGET_SPEND_REFRESH),
        ("scheduling cycle", settings.SCHEDULING_CYCLE_SECONDS, taskqueue.SCHEDULING_CYCLE),
        ("quota grants", settings.GOVERNANCE_BOUNDARY_SECONDS, taskqueue.QUOTA_GRANT_BOUNDARIES),
        ("reservations", settings.GOVERNANCE_BOUNDARY_SECONDS, taskqueue.RESERVATION_BOUNDARIES),
        ("node drain", settings.SCHEDULING_CYCLE_SECONDS, taskqueue.NODE_DRAIN_PASS),
        ("notice sweep", settings.NOTIFY_SWEEP_SECONDS, taskqueue.NOTICE_SWEEP),
        ("notice digest", NOTICE_DIGEST_SECONDS, taskqueue.NOTICE_DIGEST),
        ("endpoint scaling", settings.SERVING_AUTOSCALE_SECONDS, taskqueue.SERVING_AUTOSCALE),
        ("endpoint samples purge", LOG_ARCHIVE_PURGE_SECONDS, taskqueue.SERVING_SAMPLES_PURGE),
    ]
    for name, seconds, task in schedule:
        sender.add_periodic_task(float(seconds), sender.signature(task.name), name=name)
