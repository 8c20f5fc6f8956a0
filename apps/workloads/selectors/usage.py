"""What teams hold and may ask for: quota usage, quota bars, free capacity per GPU class and
the classes a team's request form offers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, F, QuerySet, Sum
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import ClusterNode, GpuClass
from apps.catalog.selectors import (
    gpu_classes_offered,
)
from apps.quotas.core import QuotaNumbers, format_milli, with_grants
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import grant_specs
from apps.reservations.core import reserved_by_team_class, with_reserved
from apps.reservations.selectors import active_bookings
from apps.workloads import core, rules
from apps.workloads.models import Workload


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
    """Each quota of these teams with the milli-GPU their admitted and running workloads are
    charged (what the cluster grants them, ``replicas × charged_milli``).

    Four queries whatever the number of teams and classes.
    """
    team_ids = [t.pk for t in teams]
    quotas = list(
        TeamQuota.objects.filter(team_id__in=team_ids).select_related("team", "gpu_class")
    )
    used: dict[tuple[int, int], int] = {}
    active = (
        Workload.objects.units()
        .filter(  # a sweep is charged through its trials
            team_id__in=team_ids, state__in=core.ACTIVE_STATES
        )
        .values_list("team_id", "gpu_class_id", "charged_milli", "replicas")
    )
    for team_id, class_id, milli, replicas in active:
        used[(team_id, class_id)] = used.get((team_id, class_id), 0) + milli * replicas
    # In effect now: with the approved grants and open reservations (two more queries).
    now = timezone.now()
    grants = grant_specs(now=now)
    reserved = reserved_by_team_class(active_bookings(now=now), now=now)
    out = []
    for q in quotas:
        numbers = with_grants(
            QuotaNumbers(q.guaranteed_milli, q.limit_milli),
            grants,
            team=q.team.name,
            gpu_class=q.gpu_class.name,
            now=now,
        )
        numbers = with_reserved(numbers, reserved.get((q.team.name, q.gpu_class.name), 0))
        out.append(
            QuotaUsage(
                team=q.team,
                gpu_class=q.gpu_class,
                guaranteed_milli=numbers.guaranteed_milli,
                limit_milli=numbers.limit_milli,
                used_milli=used.get((q.team_id, q.gpu_class_id), 0),
            )
        )
    return out


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
        return format_milli(self.usage.used_milli)

    @property
    def within(self) -> str:
        return format_milli(self.usage.within_guarantee_milli)

    @property
    def borrowed(self) -> str:
        return format_milli(self.usage.borrowed_milli)

    @property
    def guaranteed(self) -> str:
        return format_milli(self.usage.guaranteed_milli)

    @property
    def limit(self) -> str:
        return format_milli(self.usage.limit_milli)

    @property
    def free(self) -> str:
        return format_milli(max(0, self.usage.limit_milli - self.usage.used_milli))


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


@dataclass(frozen=True)
class GpuClassCapacity:
    gpu_class: GpuClass
    capacity_milli: int
    used_milli: int
    nodes: int
    from_inventory: bool

    @property
    def free_milli(self) -> int:
        return max(0, self.capacity_milli - self.used_milli)


def gpu_class_capacity(classes: QuerySet[GpuClass] | None = None) -> list[GpuClassCapacity]:
    """Capacity and free milli-GPU per class. Three queries whatever the number of classes.

    Capacity is the GPUs of ready, schedulable nodes of enabled clusters in the inventory;
    a class with no node in the inventory falls back to its admin-entered ``capacity_gpus``.
    Used is what admitted, starting and running workloads are charged, which is what the
    cluster grants them (``replicas × charged_milli``).
    """
    chosen = list(classes if classes is not None else gpu_classes_offered())
    ids = [c.pk for c in chosen]
    inventory = {
        row["gpu_class_id"]: (row["gpus"] or 0, row["nodes"] or 0)
        for row in ClusterNode.objects.filter(
            gpu_class_id__in=ids, cluster__enabled=True, ready=True, schedulable=True
        )
        .values("gpu_class_id")
        .annotate(gpus=Sum("gpu_count"), nodes=Count("id"))
    }
    used = dict(
        Workload.objects.units()
        .filter(gpu_class_id__in=ids, state__in=core.ACTIVE_STATES)
        .values("gpu_class_id")
        .annotate(milli=Sum(F("charged_milli") * F("replicas")))
        .values_list("gpu_class_id", "milli")
    )
    result = []
    for gpu_class in chosen:
        gpus, nodes = inventory.get(gpu_class.pk, (0, 0))
        from_inventory = nodes > 0
        capacity = gpus * 1000 if from_inventory else gpu_class.capacity_milli
        result.append(
            GpuClassCapacity(
                gpu_class=gpu_class,
                capacity_milli=capacity,
                used_milli=int(used.get(gpu_class.pk) or 0),
                nodes=nodes,
                from_inventory=from_inventory,
            )
        )
    return result


# --- what a request form offers: the classes a team may use ------------------------------------


@dataclass(frozen=True)
class ClassOffer:
    """An enabled GPU class as a team's request form shows it: usable when the team has a
    quota limit above zero (with what is left of it now), else the reason it is not."""

    gpu_class: GpuClass
    usage: QuotaUsage | None
    why_not: str = ""

    @property
    def usable(self) -> bool:
        return not self.why_not

    @property
    def left_milli(self) -> int:
        return 0 if self.usage is None else max(0, self.usage.limit_milli - self.usage.used_milli)


def class_offers_for_team(team: Team | None, *, admin: bool = False) -> list[ClassOffer]:
    """Every enabled class for ``team``'s request form, by name: those it has quota for are
    usable; the others say why not (no quota), and who may give it."""
    classes = list(gpu_classes_offered().order_by("name"))
    usages = {u.gpu_class.pk: u for u in quota_usage_for_teams([team])} if team is not None else {}
    who = rules.no_quota_advice(admin=admin)
    offers = []
    for gpu_class in classes:
        usage = usages.get(gpu_class.pk)
        why = ""
        if team is None:
            why = "choose a team first"
        elif usage is None or usage.limit_milli <= 0:
            why = f"{team.name} has no quota for it; {who}"
        offers.append(ClassOffer(gpu_class, usage, why))
    return offers


def usable_class_ids_for(teams: Iterable[Team]) -> set[int]:
    """The GPU classes any of ``teams`` has a quota limit above zero for."""
    return set(
        TeamQuota.objects.filter(team__in=list(teams), limit_milli__gt=0).values_list(
            "gpu_class_id", flat=True
        )
    )
