"""Right-sizing advice for platform admins (reads): per team and GPU class, a guarantee and a
limit suggested from measured usage over a window (``apps.quotas.advice``, the pure core), with
its evidence. Applying one is :func:`apps.telemetry.services.rightsizing.advice_apply`."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas import advice as core
from apps.quotas.models import TeamQuota
from apps.telemetry.models import UsageDay
from apps.workloads import core as wl
from apps.workloads.models import Workload

DEFAULT_DAYS = 14
MAX_DAYS = 90
SHARED_STEP_MILLI = 500  # classes that share GPUs are advised in half GPUs


@dataclass(frozen=True)
class AdviceRow:
    team: Team
    gpu_class: GpuClass
    advice: core.Advice
    days: int

    @property
    def current_guaranteed(self) -> str:
        return core.gpus(self.advice.current_guaranteed_milli)

    @property
    def current_limit(self) -> str:
        return core.gpus(self.advice.current_limit_milli)

    @property
    def guaranteed(self) -> str | None:
        g = self.advice.guaranteed_milli
        return None if g is None else core.gpus(g)

    @property
    def limit(self) -> str | None:
        limit = self.advice.limit_milli
        return None if limit is None else core.gpus(limit)

    @property
    def p95_used(self) -> str:
        return core.gpus(self.advice.evidence.p95_used_milli)

    @property
    def p95_allocated(self) -> str:
        return core.gpus(self.advice.evidence.p95_allocated_milli)

    @property
    def peak_allocated(self) -> str:
        return core.gpus(self.advice.evidence.peak_allocated_milli)


def step_of(gpu_class: GpuClass) -> int:
    return core.MILLI if gpu_class.sharing_mode == "whole" else SHARED_STEP_MILLI


def rightsizing(
    teams: list[Team] | None = None, *, days: int = DEFAULT_DAYS, now: datetime | None = None
) -> list[AdviceRow]:
    """Advice for each quota of the teams (default: all) from the last ``days`` days: hourly
    GPUs held by their workloads (admitted to finished), and used (held × each workload's
    measured share of that day; unmeasured days count as used in full)."""
    end = now or timezone.now()
    # From midnight (UTC) ``days`` days ago, so that hour h of the window lies on day h // 24.
    start = datetime.combine(end.date() - timedelta(days=days), time.min, tzinfo=UTC)
    hours = math.ceil((end - start).total_seconds() / 3600)
    quotas = TeamQuota.objects.select_related("team", "gpu_class").order_by(
        "team__name", "gpu_class__name"
    )
    if teams is not None:
        quotas = quotas.filter(team__in=teams)
    quota_list = list(quotas)
    keys = {(q.team_id, q.gpu_class_id) for q in quota_list}
    rows = (
        Workload.objects.units()
        .filter(team_id__in={k[0] for k in keys}, started_at__isnull=False, started_at__lt=end)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=start))
        .values_list(
            "id",
            "team_id",
            "gpu_class_id",
            "charged_milli",
            "replicas",
            "started_at",
            "finished_at",
            "state",
        )
    )
    shares: dict[int, dict[int, float]] = defaultdict(dict)
    measured = UsageDay.objects.filter(
        team_id__in={k[0] for k in keys}, day__gte=start.date(), day__lte=end.date()
    ).values_list("workload_id", "day", "allocated_gpu_seconds", "used_gpu_seconds")
    for workload_id, day, seconds, used_seconds in measured:
        if seconds > 0:
            shares[workload_id][(day - start.date()).days] = used_seconds / seconds
    intervals: dict[tuple[int, int], list[core.Interval]] = defaultdict(list)
    for pk, team_id, class_id, milli, replicas, started, finished, state in rows:
        if (team_id, class_id) not in keys:
            continue
        if finished is None and state not in wl.ACTIVE_STATES:
            continue  # stopped without an end time: no evidence of how long it held GPUs
        if started is None:
            continue
        stop = finished or end
        intervals[(team_id, class_id)].append(
            core.Interval(
                start=(max(started, start) - start).total_seconds() / 3600,
                end=(min(stop, end) - start).total_seconds() / 3600,
                milli=milli * replicas,
                used_share=shares.get(pk, {}),
            )
        )
    result = []
    for q in quota_list:
        held, used = core.hourly_load(intervals.get((q.team_id, q.gpu_class_id), []), hours)
        result.append(
            AdviceRow(
                team=q.team,
                gpu_class=q.gpu_class,
                advice=core.advise(
                    allocated=held,
                    used=used,
                    current_guaranteed_milli=q.guaranteed_milli,
                    current_limit_milli=q.limit_milli,
                    step_milli=step_of(q.gpu_class),
                ),
                days=days,
            )
        )
    return result
