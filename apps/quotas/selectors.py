from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Sum

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas import core
from apps.quotas.models import TeamQuota
from apps.workloads import core as workload_core
from apps.workloads.models import Workload


def guarantee_warning_for_class(gpu_class: GpuClass) -> str | None:
    total = TeamQuota.objects.filter(gpu_class=gpu_class).aggregate(s=Sum("guaranteed_milli"))["s"]
    return core.guarantee_overcommit_warning(
        class_name=gpu_class.name,
        guarantees_milli=[total or 0],
        capacity_milli=gpu_class.capacity_milli,
    )


@dataclass(frozen=True)
class QuotaUsage:
    team: Team
    gpu_class: GpuClass
    guaranteed_milli: int
    limit_milli: int
    used_milli: int

    @property
    def borrowed_milli(self) -> int:
        return max(0, self.used_milli - self.guaranteed_milli)

    @property
    def within_guarantee_milli(self) -> int:
        return min(self.used_milli, self.guaranteed_milli)

    def percent(self, milli: int) -> float:
        return 0.0 if self.limit_milli <= 0 else round(100.0 * milli / self.limit_milli, 1)


def quota_usage_for_teams(teams: Iterable[Team]) -> list[QuotaUsage]:
    """Each quota of these teams with the milli-GPU their admitted and running workloads hold.

    Two queries whatever the number of teams and classes.
    """
    team_ids = [t.pk for t in teams]
    quotas = list(
        TeamQuota.objects.filter(team_id__in=team_ids).select_related("team", "gpu_class")
    )
    used: dict[tuple[int, int], int] = {}
    active = Workload.objects.filter(
        team_id__in=team_ids, state__in=workload_core.ACTIVE_STATES
    ).values_list("team_id", "gpu_class_id", "gpu_milli", "replicas")
    for team_id, class_id, milli, replicas in active:
        used[(team_id, class_id)] = used.get((team_id, class_id), 0) + milli * replicas
    return [
        QuotaUsage(
            team=q.team,
            gpu_class=q.gpu_class,
            guaranteed_milli=q.guaranteed_milli,
            limit_milli=q.limit_milli,
            used_milli=used.get((q.team_id, q.gpu_class_id), 0),
        )
        for q in quotas
    ]


@dataclass(frozen=True)
class QuotaBar:
    """One quota as the portal draws it: a bar as wide as the limit, split into the part used
    within the guarantee and the borrowed part, with a mark where the guarantee ends."""

    usage: QuotaUsage
    within_percent: float
    borrowed_percent: float
    guarantee_percent: float

    @property
    def used(self) -> str:
        return core.format_milli(self.usage.used_milli)

    @property
    def within(self) -> str:
        return core.format_milli(self.usage.within_guarantee_milli)

    @property
    def borrowed(self) -> str:
        return core.format_milli(self.usage.borrowed_milli)

    @property
    def guaranteed(self) -> str:
        return core.format_milli(self.usage.guaranteed_milli)

    @property
    def limit(self) -> str:
        return core.format_milli(self.usage.limit_milli)

    @property
    def free(self) -> str:
        return core.format_milli(max(0, self.usage.limit_milli - self.usage.used_milli))


def quota_bars_for_teams(teams: Iterable[Team]) -> list[QuotaBar]:
    """``quota_usage_for_teams`` with the proportions a bar needs (percent of the limit)."""
    return [
        QuotaBar(
            usage=q,
            within_percent=min(100.0, q.percent(q.within_guarantee_milli)),
            borrowed_percent=min(
                100.0 - min(100.0, q.percent(q.within_guarantee_milli)),
                q.percent(q.borrowed_milli),
            ),
            guarantee_percent=min(100.0, q.percent(q.guaranteed_milli)),
        )
        for q in quota_usage_for_teams(teams)
    ]
