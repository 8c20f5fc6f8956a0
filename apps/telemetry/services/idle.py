"""Idle writes: idle policies, notebooks' Jupyter activity, the idle policy applied to a
workload in an ingestion pass (warn, suspend, flag, each with its notice), and idle suspension
for the system actor."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.selectors import team_leads
from apps.audit.services import audited_delete, audited_save
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.orchestration import cluster_reads
from apps.orchestration.errors import ClusterError
from apps.telemetry import core
from apps.telemetry.models import (
    IdleNotice,
    IdlePolicy,
    WorkloadUsage,
)
from apps.telemetry.services.records import (
    Held,
    IngestResult,
    UsageState,
)
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import workload_suspend_idle

log = logging.getLogger(__name__)


# --- idle policies -----------------------------------------------------------------------


def idle_policy_save(
    *, actor: User | None, policy: IdlePolicy, source_ip: str | None = None
) -> IdlePolicy:
    """Create or change an idle policy from its edited row; the next ingestion pass applies it.
    Records what changed (nothing when an edit changed nothing)."""
    return audited_save(actor=actor, obj=policy, action="idlepolicy", source_ip=source_ip)[0]


def idle_policy_delete(
    *, actor: User | None, policy: IdlePolicy, source_ip: str | None = None
) -> None:
    """Delete an idle policy: a less specific one, or the settings' defaults, apply again."""
    audited_delete(actor=actor, obj=policy, action="idlepolicy", source_ip=source_ip)


# --- Jupyter activity --------------------------------------------------------------------


def notebook_activity_refresh(*, now: datetime | None = None) -> dict[int, datetime]:
    """Ask every running notebook's Jupyter about its use and record it on its usage row:
    Jupyter's own last activity, or now while a kernel is executing. The recorded moment
    never goes back (a kernel that was busy at the last look was in use then). A notebook whose
    Jupyter does not answer keeps what was recorded: its GPU decides alone.

    What was recorded, by workload id."""
    moment = now or timezone.now()
    recorded: dict[int, datetime] = {}
    running = Workload.objects.filter(kind=wl.KIND_NOTEBOOK, state=wl.RUNNING).select_related(
        "team"
    )
    for workload in running:
        try:
            activity = cluster_reads.notebook_activity(workload)
        except (cluster_reads.NotebookUnavailable, ClusterError) as exc:
            log.info("telemetry: no Jupyter activity for workload %s: %s", workload.pk, exc)
            continue
        last = moment if activity.busy else activity.last_activity
        usage, _ = WorkloadUsage.objects.get_or_create(workload_id=workload.pk)
        if last is not None and usage.jupyter_last_activity is not None:
            last = max(last, usage.jupyter_last_activity)
        usage.jupyter_last_activity = last or usage.jupyter_last_activity
        usage.jupyter_checked_at = moment
        usage.save(update_fields=["jupyter_last_activity", "jupyter_checked_at"])
        if usage.jupyter_last_activity is not None:
            recorded[workload.pk] = usage.jupyter_last_activity
    return recorded


def _policy_defaults() -> core.IdlePolicy:
    return core.IdlePolicy(
        enabled=True,
        threshold=settings.TELEMETRY_IDLE_THRESHOLD_PERCENT / 100,
        warn_after=timedelta(seconds=settings.TELEMETRY_IDLE_WARN_SECONDS),
        suspend_after=timedelta(seconds=settings.TELEMETRY_IDLE_SUSPEND_SECONDS),
        flag_after=timedelta(seconds=settings.TELEMETRY_IDLE_FLAG_SECONDS),
    )


class PolicyBook:
    """Resolves the idle policy of a team and GPU class: most specific row wins."""

    def __init__(self) -> None:
        self.rows = {(p.team_id, p.gpu_class_id): p for p in IdlePolicy.objects.all()}
        self.default = _policy_defaults()

    def for_workload(self, team_id: int, gpu_class_id: int) -> core.IdlePolicy:
        for key in ((team_id, gpu_class_id), (team_id, None), (None, gpu_class_id), (None, None)):
            row = self.rows.get(key)
            if row is not None:
                return core.IdlePolicy(
                    enabled=row.enabled,
                    threshold=row.threshold_percent / 100,
                    warn_after=row.warn_after,
                    suspend_after=row.suspend_after,
                    flag_after=row.flag_after,
                )
        return self.default


def _apply_idle_policy(
    workload: Held,
    usage: UsageState,
    utilisation: float | None,
    activity_at: datetime | None,
    policies: PolicyBook,
    window_start: datetime,
    now: datetime,
    result: IngestResult,
) -> None:
    policy = core.with_idle_timeout(
        policies.for_workload(workload.team_id, workload.gpu_class_id),
        kind=workload.kind,
        timeout_seconds=workload.idle_timeout_seconds,
    )
    decision = core.idle_decide(
        kind=workload.kind,
        utilisation=utilisation,
        policy=policy,
        state=core.IdleState(usage.idle_since, usage.warned_at, usage.flagged_at),
        window_start=window_start,
        now=now,
        activity_at=activity_at,
    )
    usage.idle_since = decision.idle_since
    if decision.busy_again and (usage.warned_at or usage.flagged_at):
        usage.warned_at = usage.flagged_at = None
        IdleNotice.objects.filter(
            workload_id=workload.pk,
            kind__in=(IdleNotice.Kind.WARNED, IdleNotice.Kind.FLAGGED),
            resolved_at__isnull=True,
        ).update(resolved_at=now)
    if decision.idle_since is None:
        return
    idle_for = core.describe_minutes(now - decision.idle_since)
    below = f"GPU < {policy.threshold * 100:g}%"
    if workload.kind == wl.KIND_NOTEBOOK and activity_at is not None:
        below += ", no Jupyter activity"
    gpus = workload.total_milli / 1000
    common = {
        "workload_id": workload.pk,
        "utilisation": utilisation or 0.0,
        "idle_since": decision.idle_since,
        "allocated_gpus": gpus,
        "created_at": now,
    }
    if decision.warn:
        suspend_at = decision.idle_since + policy.suspend_after
        warned = IdleNotice.objects.create(
            kind=IdleNotice.Kind.WARNED,
            message=(
                f"Your notebook's GPU has been idle for {idle_for} ({below}). It will be "
                f"suspended at {suspend_at:%H:%M} UTC unless it is used; your files are kept."
            ),
            **common,
        )
        model = Workload.objects.select_related("owner", "team").get(pk=workload.pk)
        notify(
            event=NoticeEvent.IDLE_WARNING,
            users=[model.owner],
            title=f"Notebook {model.name} will be suspended at {suspend_at:%H:%M} UTC",
            body=warned.message,
            key=f"idle-notice-{warned.pk}",
            link=f"/workloads/{model.pk}/",
            team=model.team,
        )
        usage.warned_at = now
        result.warned.append(workload.pk)
    if decision.suspend:
        reason = (
            f"Suspended after {idle_for} idle ({below}); your files are kept — resume in one click."
        )
        model = Workload.objects.get(pk=workload.pk)
        if telemetry_idle_suspend(workload=model, reason=reason, notice=common):
            usage.idle_since = usage.warned_at = None
            result.suspended.append(workload.pk)
    if decision.flag:
        message = (
            f"{workload.get_kind_display()} {workload.name} holds {gpus:g} GPU that have been "
            f"idle for {idle_for} ({below}). Please check it, or cancel it to free the GPUs."
        )
        flagged = IdleNotice.objects.create(kind=IdleNotice.Kind.FLAGGED, message=message, **common)
        usage.flagged_at = now
        result.flagged.append(workload.pk)
        model = Workload.objects.select_related("owner", "team").get(pk=workload.pk)
        # Owner and team leads, each through the channels they chose (delivered on commit).
        notify(
            event=NoticeEvent.IDLE_WARNING,
            users=[model.owner, *team_leads(model.team_id)],
            title=f"Idle GPUs: {model.name} (#{model.pk})",
            body=message,
            key=f"idle-notice-{flagged.pk}",
            link=f"/workloads/{model.pk}/",
            team=model.team,
        )


def telemetry_idle_suspend(
    *, workload: Workload, reason: str, notice: Mapping[str, Any] | None = None
) -> bool:
    """Suspend an idle notebook as the system (the one suspend of the workloads app) and record
    the notice. False if it is not a running notebook or lost a race."""
    with transaction.atomic():
        if not workload_suspend_idle(workload=workload, reason=reason):
            return False
        values = dict(notice or {})
        values.pop("workload", None)
        values["workload_id"] = workload.pk
        values.setdefault("utilisation", 0.0)
        values.setdefault("idle_since", timezone.now())
        values.setdefault("allocated_gpus", workload.total_milli / 1000)
        IdleNotice.objects.create(kind=IdleNotice.Kind.SUSPENDED, message=reason, **values)
    return True


def _close_finished_suspensions(now: datetime) -> None:
    """A suspension's reclaimed time ends when the notebook is resumed, cancelled or fails."""
    open_notices = IdleNotice.objects.filter(
        kind=IdleNotice.Kind.SUSPENDED, resolved_at__isnull=True
    ).exclude(workload__state=wl.SUSPENDED)
    for notice in open_notices.select_related("workload"):
        notice.resolved_at = min(now, max(notice.created_at, notice.workload.updated_at))
        notice.save(update_fields=["resolved_at"])


def idle_notice_dismiss(*, notice: IdleNotice) -> None:
    IdleNotice.objects.filter(pk=notice.pk, resolved_at__isnull=True).update(
        resolved_at=timezone.now()
    )
