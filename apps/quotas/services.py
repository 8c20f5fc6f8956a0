from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.accounts.models import Team, User
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass
from apps.common import taskqueue
from apps.quotas import core
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import guarantee_warning_for_class


@dataclass(frozen=True)
class QuotaResult:
    quota: TeamQuota
    warning: str | None


def team_quota_set(
    *,
    actor: User | None,
    team: Team,
    gpu_class: GpuClass,
    guaranteed_milli: int,
    limit_milli: int,
    per_user_cap_milli: int | None = None,
    source_ip: str | None = None,
) -> QuotaResult:
    """Create or change a team's quota for one GPU class.

    Returns the quota and, if the guarantees of all teams now exceed the class's known
    capacity, a warning to show the admin (the change is still saved: capacity may be
    about to grow, and the scheduler honours guarantees in order of fair share).
    """
    errors = core.quota_errors(
        guaranteed_milli=guaranteed_milli,
        limit_milli=limit_milli,
        per_user_cap_milli=per_user_cap_milli,
    )
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        quota, created = TeamQuota.objects.select_for_update().get_or_create(
            team=team,
            gpu_class=gpu_class,
            defaults={
                "guaranteed_milli": guaranteed_milli,
                "limit_milli": limit_milli,
                "per_user_cap_milli": per_user_cap_milli,
            },
        )
        before = {
            "guaranteed_milli": quota.guaranteed_milli,
            "limit_milli": quota.limit_milli,
            "per_user_cap_milli": quota.per_user_cap_milli,
        }
        if not created:
            quota.guaranteed_milli = guaranteed_milli
            quota.limit_milli = limit_milli
            quota.per_user_cap_milli = per_user_cap_milli
            quota.save()
        audit_record(
            actor=actor,
            action="quota.create" if created else "quota.update",
            obj=quota,
            source_ip=source_ip,
            details={
                "before": None if created else before,
                "after": {
                    "guaranteed_milli": guaranteed_milli,
                    "limit_milli": limit_milli,
                    "per_user_cap_milli": per_user_cap_milli,
                },
            },
        )
        warning = guarantee_warning_for_class(gpu_class)
        # Kubernetes enforces the limit a second time: refresh the ResourceQuota.
        taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(team.pk)
    return QuotaResult(quota=quota, warning=warning)


def team_quota_delete(
    *, actor: User | None, quota: TeamQuota, source_ip: str | None = None
) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action="quota.delete", obj=quota, source_ip=source_ip)
        team_id = quota.team_id
        quota.delete()
        taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(team_id)
