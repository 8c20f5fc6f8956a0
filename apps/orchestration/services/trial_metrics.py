"""Running trials' metrics: the last metrics line each prints, read from the end of its
pod's log while it runs; and every running training job's (or trial's) last checkpoint report
(docs/checkpoints.md), which preemption reads to choose the victims that lose the least
work."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from apps.catalog.models import Cluster
from apps.orchestration import archive, cluster_reads, clusters
from apps.orchestration import manifests as m
from apps.orchestration.errors import (
    ClusterError,
    ClusterUnreachable,
)
from apps.orchestration.models import (
    LiveMetrics,
)
from apps.orchestration.selectors import (
    placed_on,
)
from apps.orchestration.services.status_sync import group_by_workload
from apps.workloads import core as wl
from apps.workloads.models import Workload

# The end of a running trial's log read for its metrics line, and the trials one pass reads at
# most (the longest unread first; the rest wait for the next pass).
TRIAL_METRICS_TAIL_LINES = 100


TRIAL_METRICS_PER_PASS = 64


@dataclass
class MetricsResult:
    read: int = 0
    lines: int = 0  # trials whose metrics line changed
    checkpoints: int = 0  # workloads whose last reported checkpoint changed
    problems: list[str] = field(default_factory=list)


def trial_metrics_pass(*, cluster: Cluster, now: datetime | None = None) -> MetricsResult:
    """The last metrics line of each running trial of a sweep on the cluster, read from the end
    of its pod's log and kept on the trial (LiveMetrics), so that the trials table shows it
    while the trial runs, not only once its log is archived. The same read of every running
    training job and trial keeps the last checkpoint its log reports (replica 0's: the rank
    that saves) on the workload (:func:`checkpoint_store`).

    Bounded: running trials only, each at most once per ORCHESTRATION_TRIAL_METRICS_SECONDS,
    at most TRIAL_METRICS_PER_PASS of them (the longest unread first), the last
    TRIAL_METRICS_TAIL_LINES lines of each; one list call for the sweeps' pods, then one log
    read per trial. A tail without a metrics line keeps the line read before. Raises
    :class:`ClusterUnreachable` when the pods cannot be listed; a log that cannot be read is a
    problem, and the next trials are still read."""
    now = now or timezone.now()
    fresh = now - timedelta(seconds=settings.ORCHESTRATION_TRIAL_METRICS_SECONDS)
    trials = placed_on(
        Workload.objects.filter(
            Q(sweep__isnull=False) | Q(kind=wl.KIND_TRAINING), state=wl.RUNNING
        ),
        cluster,
    )
    due = list(
        trials.exclude(live_metrics__read_at__gte=fresh)
        .select_related("team", "live_metrics")
        .order_by(F("live_metrics__read_at").asc(nulls_first=True), "pk")[:TRIAL_METRICS_PER_PASS]
    )
    result = MetricsResult()
    if not due:
        return result
    kube = clusters.kube_for(cluster)
    pods = group_by_workload(
        kube.list_owned(
            "v1",
            "Pod",
            label_selector=f"{m.LABEL_KIND} in ({wl.KIND_SWEEP},{wl.KIND_TRAINING})",
        )
    )
    for trial in due:
        mine = pods.get(trial.pk, [])
        phases = {str(p["metadata"]["name"]): (p.get("status") or {}).get("phase") for p in mine}
        running = [
            run
            for run in cluster_reads.pod_runs(mine)
            if phases.get(run.name) == "Running" and not run.lost
        ]
        if not running:
            continue
        # The newest pod (a retry replaces a failed one) of replica 0, the rank that saves.
        run = ([r for r in running if r.replica == 0] or running)[-1]
        try:
            lines = list(
                cluster_reads.pod_run_log(
                    trial, run, tail_lines=TRIAL_METRICS_TAIL_LINES, kube=kube
                )
            )
        except ClusterUnreachable:
            raise
        except ClusterError as exc:
            result.problems.append(f"{run.name}: {exc}")
            continue
        result.read += 1
        if live_metrics_store(
            workload=trial, pod_name=run.name, entry=archive.metrics_entry(lines), now=now
        ):
            result.lines += 1
        if checkpoint_store(workload=trial, report=archive.checkpoint_entry(lines, now=now)):
            result.checkpoints += 1
    return result


def checkpoint_store(*, workload: Workload, report: archive.CheckpointReport | None) -> bool:
    """Keep the newest checkpoint a running workload reported (None: the tail held no report,
    the one kept stays). Returns whether it changed."""
    if report is None:
        return False
    # Only a newer one: a pass that read an older tail (or a run's clock) never goes back.
    newer = Q(checkpoint_at__isnull=True) | Q(checkpoint_at__lt=report.at)
    changed = (
        Workload.objects.filter(newer, pk=workload.pk).update(
            checkpoint_at=report.at, checkpoint_step=report.step
        )
        == 1
    )
    if changed:
        workload.checkpoint_at, workload.checkpoint_step = report.at, report.step
    return changed


def live_metrics_store(
    *,
    workload: Workload,
    pod_name: str,
    entry: tuple[str, datetime | None] | None,
    now: datetime,
) -> bool:
    """Keep a running trial's latest metrics line (``entry``: the line and its time, None when
    the tail held none: the earlier line stays). Returns whether the line changed."""
    row = LiveMetrics.objects.filter(workload=workload).first()
    if row is None:
        LiveMetrics.objects.create(
            workload=workload,
            line=entry[0] if entry else "",
            line_at=(entry[1] or now) if entry else None,
            pod_name=pod_name[:253],
            read_at=now,
        )
        return entry is not None
    changes: dict[str, Any] = {"read_at": now, "pod_name": pod_name[:253]}
    changed = entry is not None and entry[0] != row.line
    if entry is not None:
        changes["line"] = entry[0]
        changes["line_at"] = entry[1] or (now if changed else row.line_at)
    LiveMetrics.objects.filter(pk=row.pk).update(**changes)
    return changed
