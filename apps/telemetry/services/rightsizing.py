"""Applying right-sizing advice (the one write): sets the quota the advice suggests through the
quotas service and records the evidence in the audit trail."""

from __future__ import annotations

from datetime import datetime

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass
from apps.quotas.models import TeamQuota
from apps.quotas.services import QuotaResult, team_quota_set
from apps.telemetry.selectors.rightsizing import rightsizing


def advice_apply(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    days: int,
    source_ip: str | None = None,
    now: datetime | None = None,
) -> QuotaResult:
    """Set the quota the advice suggests now (computed again here, never taken from a form),
    through the quotas service; the evidence goes into the audit trail with it."""
    if not platform_may(actor, Act.GOVERN_TEAMS):
        raise PermissionDenied("Only platform admins apply right-sizing advice.")
    rows = [r for r in rightsizing([team], days=days, now=now) if r.gpu_class.pk == gpu_class.pk]
    if not rows or rows[0].advice.guaranteed_milli is None:
        raise ValidationError(
            rows[0].advice.reason if rows else "The team has no quota of this class."
        )
    advice = rows[0].advice
    assert advice.guaranteed_milli is not None and advice.limit_milli is not None
    quota = TeamQuota.objects.get(team=team, gpu_class=gpu_class)
    cap = quota.per_user_cap_milli
    with transaction.atomic():
        result = team_quota_set(
            actor=actor,
            team=team,
            gpu_class=gpu_class,
            guaranteed_milli=advice.guaranteed_milli,
            limit_milli=advice.limit_milli,
            per_user_cap_milli=None if cap is None else min(cap, advice.limit_milli),
            source_ip=source_ip,
        )
        evidence = advice.evidence
        audit_record(
            actor=actor,
            action="quota.advice_applied",
            obj=result.quota,
            source_ip=source_ip,
            details={
                "days": days,
                "reason": advice.reason,
                "allocated_gpu_hours": evidence.allocated_gpu_hours,
                "used_gpu_hours": evidence.used_gpu_hours,
                "p95_used_milli": evidence.p95_used_milli,
                "p95_allocated_milli": evidence.p95_allocated_milli,
                "peak_allocated_milli": evidence.peak_allocated_milli,
            },
        )
    return result
