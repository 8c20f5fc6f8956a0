from __future__ import annotations

import base64
from collections.abc import Iterable

from django.db.models import F, Q, QuerySet

from apps.accounts.models import Membership, Team, User
from apps.catalog.models import GpuClass
from apps.orchestration.clusters import ClusterConfigError, kube_for
from apps.orchestration.kube import ClusterUnreachable
from apps.orchestration.selectors import cluster_of
from apps.workloads import core
from apps.workloads.models import RequestTemplate, Workload


def workloads_visible_to(user: User) -> QuerySet[Workload]:
    """Workloads the user may see: their teams' (owner, teammates, leads); all for admins.

    Phrased as ``team_id IN (my teams)`` rather than a join through memberships, so that
    PostgreSQL walks the created_at index for a page instead of sorting every visible row.
    """
    qs = Workload.objects.select_related("owner", "team", "gpu_class", "image").filter(
        deleted_at__isnull=True
    )
    if user.is_staff:
        return qs
    return qs.filter(team_id__in=Membership.objects.filter(user=user).values("team_id"))


def workload_for_user(user: User, workload_id: int) -> Workload:
    """One workload the user may see; ``Workload.DoesNotExist`` (→ 404) for anyone else's."""
    return workloads_visible_to(user).get(pk=workload_id)


# --- portal reads -------------------------------------------------------------------------


def workload_may_manage(user: User, workload: Workload) -> bool:
    """Whether ``user`` may cancel, suspend or resume it: its owner, a team lead, an admin."""
    if user.is_staff or workload.owner_id == user.pk:
        return True
    return Membership.objects.filter(
        user=user, team_id=workload.team_id, role=Membership.Role.LEAD
    ).exists()


def workload_may_open(user: User, workload: Workload) -> bool:
    """Only a notebook's owner and platform admins may open it (it is their home directory)."""
    return workload.kind == core.KIND_NOTEBOOK and (user.is_staff or workload.owner_id == user.pk)


def waiting_workloads_for_teams(teams: Iterable[Team]) -> QuerySet[Workload]:
    """The teams' workloads waiting for GPUs, in queue order (unknown positions last)."""
    return (
        Workload.objects.select_related("owner", "team", "gpu_class")
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
    qs = Workload.objects.select_related("owner", "team", "gpu_class", "image").filter(
        team=team, deleted_at__isnull=True
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


class NotebookUnavailable(RuntimeError):
    """The notebook cannot be opened now; the message says why."""


def notebook_token(workload: Workload) -> str:
    """The Jupyter token, read from the workload's Secret in the cluster on demand.

    It lives only there: never stored in the database, never logged.
    """
    spec_secret = f"wl-{workload.pk}-token"
    cluster = cluster_of(workload)
    if cluster is None:
        raise NotebookUnavailable("The notebook has not been placed on a cluster yet.")
    try:
        secret = kube_for(cluster).get("v1", "Secret", spec_secret, workload.team.namespace)
    except (ClusterConfigError, ClusterUnreachable) as exc:
        raise NotebookUnavailable("The cluster is unreachable; try again in a moment.") from exc
    data = (secret or {}).get("data") or {}
    encoded = data.get("token")
    if not encoded:
        raise NotebookUnavailable("The notebook is still starting; try again in a moment.")
    return base64.b64decode(encoded).decode("utf-8")


def notebook_path(workload: Workload) -> str:
    return f"/notebooks/{workload.team.namespace}/{workload.pk}/"


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
