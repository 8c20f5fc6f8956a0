"""Sweeps recorded before trials (one gang of all points) that have not finished: each point
becomes a trial waiting in the queue, and the sweep itself holds no GPUs any more. Points
that were running restart as trials (the reconciler removes the sweep's old Jobs)."""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.utils import timezone

from apps.workloads import core

TRIAL_FIELDS = (
    "kind",
    "owner_id",
    "team_id",
    "gpu_class_id",
    "image_id",
    "gpu_milli",
    "charged_milli",
    "priority_class",
    "command",
    "args",
    "env",
    "secrets",
    "cpu_milli",
    "memory_mib",
    "max_runtime_seconds",
    "idle_timeout_seconds",
    "retries",
    "requeue_on_preemption",
    "created_at",
)
REASON = "Recorded again as trials: each point is admitted and run on its own."


def forwards(apps: Any, schema_editor: Any) -> None:
    Workload = apps.get_model("workloads", "Workload")
    WorkloadEvent = apps.get_model("workloads", "WorkloadEvent")
    legacy = Workload.objects.filter(kind=core.KIND_SWEEP, sweep__isnull=True).exclude(
        state__in=core.TERMINAL_STATES
    )
    now = timezone.now()
    for sweep in legacy:
        if Workload.objects.filter(sweep=sweep).exists():
            continue
        params = dict(sweep.params or {})
        points = core.sweep_points(params.get("grid") or {})
        shared = {k: v for k, v in params.items() if k not in ("grid", "parallelism")}
        for index, point in enumerate(points):
            trial = Workload.objects.create(
                **{f: getattr(sweep, f) for f in TRIAL_FIELDS},
                name=f"{sweep.name[:92]} #{index}",
                replicas=1,
                params={**shared, "grid": {k: [v] for k, v in point.items()}, "point": point},
                state=core.PENDING,
                sweep=sweep,
                trial_index=index,
            )
            WorkloadEvent.objects.create(
                workload=trial, from_state="", to_state=core.PENDING, reason=REASON
            )
        params["parallelism"] = params.get("parallelism") or max(1, min(4, len(points)))
        WorkloadEvent.objects.create(
            workload=sweep, from_state=sweep.state, to_state=core.QUEUED, reason=REASON
        )
        Workload.objects.filter(pk=sweep.pk).update(
            state=core.QUEUED,
            params=params,
            placement={},
            cluster=None,
            last_reason=REASON,
            queue_position=None,
            updated_at=now,
        )


class Migration(migrations.Migration):
    dependencies = [("workloads", "0009_sweep_trials")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
