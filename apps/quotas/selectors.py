from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet, Sum

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_ids_of
from apps.catalog.models import GpuClass
from apps.quotas import core
from apps.quotas.models import QuotaGrant, QuotaRequest, TeamQuota


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


# --- quota requests and grants ----------------------------------------------------------------


def grant_specs(*, now: datetime, until: datetime | None = None) -> list[core.Grant]:
    """Approved grants in effect at ``now`` (or at any time up to ``until``), as plain data."""
    qs = QuotaGrant.objects.filter(ends_at__gt=now, starts_at__lte=until or now)
    return [g.spec() for g in qs.select_related("team", "gpu_class", "user").order_by("id")]


def effective_team_quota(
    team: Team, gpu_class: GpuClass, *, user: User | None, now: datetime
) -> core.QuotaNumbers | None:
    """The team's quota of the class at ``now`` with the grants active then (``user``: with
    the grants made to them too), or None when the team has no quota of the class."""
    base = team_quota(team, gpu_class)
    if base is None:
        return None
    grants = [
        g.spec()
        for g in QuotaGrant.objects.filter(
            team=team, gpu_class=gpu_class, starts_at__lte=now, ends_at__gt=now
        ).select_related("team", "gpu_class", "user")
    ]
    return core.with_grants(
        core.QuotaNumbers(base.guaranteed_milli, base.limit_milli, base.per_user_cap_milli),
        grants,
        team=team.name,
        gpu_class=gpu_class.name,
        now=now,
        user=user.get_username() if user is not None else None,
    )


def team_guarantee_grants(
    gpu_class: GpuClass, *, start: datetime, end: datetime
) -> list[core.Grant]:
    """Team-wide grants of the class overlapping ``[start, end)``: guarantee promised then."""
    return [
        g.spec()
        for g in QuotaGrant.objects.filter(
            gpu_class=gpu_class, user__isnull=True, starts_at__lt=end, ends_at__gt=start
        ).select_related("team", "gpu_class")
    ]


def guaranteed_total(gpu_class: GpuClass) -> int:
    """The base guarantees of every team in the class (milli-GPU)."""
    total = TeamQuota.objects.filter(gpu_class=gpu_class).aggregate(s=Sum("guaranteed_milli"))
    return int(total["s"] or 0)


def quota_requests_visible_to(user: User) -> QuerySet[QuotaRequest]:
    """Admins see every request; others those of their teams."""
    qs = QuotaRequest.objects.select_related(
        "team", "gpu_class", "requested_by", "decided_by", "grant"
    )
    if platform_may(user, Act.SEE_TEAMS):
        return qs
    return qs.filter(team_id__in=team_ids_of(user))


def quota_request_for_user(user: User, pk: int) -> QuotaRequest:
    """The request if ``user`` may see it; else DoesNotExist (a 404, never a leak)."""
    return quota_requests_visible_to(user).get(pk=pk)


def quota_request_may_decide(user: User, request: QuotaRequest) -> bool:
    return core.may_decide(
        kind=request.kind,
        is_admin=platform_may(user, Act.GOVERN_TEAMS),
        leads_team=is_team_lead(user, request.team_id),
    )


def quota_requests_to_decide(user: User) -> list[QuotaRequest]:
    """Pending requests ``user`` may decide, oldest first."""
    pending = quota_requests_visible_to(user).filter(state=QuotaRequest.State.PENDING)
    return [r for r in pending.order_by("created_at", "id") if quota_request_may_decide(user, r)]
