"""Who may see and manage which workloads, and the portal's reads of them."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Q, QuerySet

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_ids_of
from apps.catalog.models import GpuClass
from apps.workloads import core
from apps.workloads.models import RequestTemplate, Workload


def workloads_visible_to(user: User) -> QuerySet[Workload]:
    """Workloads the user may see: their teams' (owner, teammates, leads); all for admins.

    Phrased as ``team_id IN (1, 2)`` with the ids read first, rather than a join or a
    subquery through memberships: with the literal list PostgreSQL walks the live-workload
    index of a team for a page (and its count) instead of reading and sorting every row.
    """
    qs = Workload.objects.select_related("owner", "team", "gpu_class", "image").filter(
        deleted_at__isnull=True
    )
    if platform_may(user, Act.SEE_TEAMS):
        return qs
    return qs.filter(team_id__in=team_ids_of(user))


def workload_for_user(user: User, workload_id: int) -> Workload:
    """One workload the user may see; ``Workload.DoesNotExist`` (→ 404) for anyone else's."""
    return workloads_visible_to(user).get(pk=workload_id)


# --- portal reads -------------------------------------------------------------------------


def workload_may_manage(user: User, workload: Workload) -> bool:
    """Whether ``user`` may cancel, suspend, resume or delete it: its owner, a lead of its team,
    an admin."""
    return workload.owner_id == user.pk or is_team_lead(user, workload.team_id)


def workload_may_open(user: User, workload: Workload) -> bool:
    """Only a notebook's owner and platform admins may open it (it is their home directory)."""
    return workload.kind == core.KIND_NOTEBOOK and (
        workload.owner_id == user.pk or platform_may(user, Act.ACT_FOR_TEAMS)
    )


def waiting_workloads_for_teams(teams: Iterable[Team]) -> QuerySet[Workload]:
    """The teams' workloads waiting for GPUs, in queue order (unknown positions last)."""
    return (
        Workload.objects.units()
        .select_related("owner", "team", "gpu_class")
        .filter(team__in=list(teams), state__in=core.WAITING_STATES | {core.PREEMPTED})
        .order_by(F("queue_position").asc(nulls_last=True), "created_at", "id")
    )


def team_workloads(
    team: Team,
    *,
    states: Iterable[str] | None = None,
    kind: str | None = None,
    owner: User | None = None,
    gpu_class: GpuClass | None = None,
) -> QuerySet[Workload]:
    qs = (
        Workload.objects.listed()
        .select_related("owner", "team", "gpu_class", "image")
        .filter(team=team, deleted_at__isnull=True)
    )
    if states is not None:
        qs = qs.filter(state__in=list(states))
    if kind:
        qs = qs.filter(kind=kind)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if gpu_class is not None:
        qs = qs.filter(gpu_class=gpu_class)
    return qs


def request_templates_for(user: User, *, kind: str | None = None) -> QuerySet[RequestTemplate]:
    """The user's own templates and those shared with their teams."""
    qs = RequestTemplate.objects.select_related("owner", "team").filter(
        Q(owner=user) | Q(team__memberships__user=user)
    )
    if kind:
        qs = qs.filter(kind=kind)
    return qs.distinct().order_by("name", "id")


def request_template_for_user(user: User, template_id: int) -> RequestTemplate:
    """One template the user may use; ``RequestTemplate.DoesNotExist`` (→ 404) otherwise."""
    return request_templates_for(user).get(pk=template_id)
