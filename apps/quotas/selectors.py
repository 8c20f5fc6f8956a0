from __future__ import annotations

from django.db.models import Sum

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas import core
from apps.quotas.models import TeamQuota


def team_quota(team: Team, gpu_class: GpuClass) -> TeamQuota | None:
    """The team's quota of the class, or None (no quota: nothing may be asked of it)."""
    return TeamQuota.objects.filter(team=team, gpu_class=gpu_class).first()


def guarantee_warning_for_class(gpu_class: GpuClass) -> str | None:
    total = TeamQuota.objects.filter(gpu_class=gpu_class).aggregate(s=Sum("guaranteed_milli"))["s"]
    return core.guarantee_overcommit_warning(
        class_name=gpu_class.name,
        guarantees_milli=[total or 0],
        capacity_milli=gpu_class.capacity_milli,
    )
