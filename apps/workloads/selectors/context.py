"""What a request is checked against (the rules' Context) and the preemption grace periods."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may
from apps.budgets.selectors import budget_state
from apps.catalog.core import IMAGE_AVAILABLE
from apps.catalog.models import GpuClass, Image
from apps.catalog.selectors import (
    dra_unpublished,
    image_availability,
    images_offered,
    ready_nodes,
    sharing_class_names,
)
from apps.credentials.selectors import secrets_usable_by
from apps.datasets.selectors import team_datasets
from apps.policies.selectors import team_policy_spec
from apps.reservations.selectors import effective_quota
from apps.workloads import core, rules
from apps.workloads.models import Workload


def preemption_grace_seconds() -> dict[str, int]:
    """Grace period per priority class as configured: the one the scheduler waits for, the pod
    is given (terminationGracePeriodSeconds) and the preemption message names."""
    override = settings.SCHEDULING_PREEMPTION_GRACE_SECONDS
    return {p: core.grace_seconds_for(p, override) for p in core.PRIORITY_ORDER}


# --- what a request is checked against -------------------------------------------------------


def request_context(
    *, actor: User, team: Team, gpu_class: GpuClass, image: Image, kind: str | None = None
) -> rules.Context:
    """What the request rule set reads of the database for ``actor`` asking ``team``'s quota
    of ``gpu_class`` with ``image``: the role, the class's ready nodes, the quota, and what
    one replica asks for besides GPUs, the secrets the actor may use, the team's datasets, its
    policy and this month's budget, and which clusters' nodes of the class hold the image (and
    the catalog's images for ``kind``). Ten small queries (a few more when the team has a
    policy)."""
    defaults = {f.name: f.get_default() for f in Workload._meta.fields}
    catalog = [i for i in images_offered() if kind is None or rules.image_suits(kind, i.kind)]
    on_nodes = image_availability([*catalog, image], gpu_class=gpu_class)
    names = {i.name for i in catalog}
    there: dict[str, list[str]] = {}
    for name, clusters in on_nodes.items():
        for c in clusters:
            if c.status == IMAGE_AVAILABLE and name in names:
                there.setdefault(c.cluster, []).append(name)
    return rules.Context(
        team=team.name,
        leads=is_team_lead(actor, team.pk),
        gpu_class=gpu_class,
        image=image,
        nodes=tuple(ready_nodes(gpu_class)),
        quota=effective_quota(team, gpu_class, user=actor, now=timezone.now()),
        sharing_classes=tuple(sharing_class_names(besides=gpu_class)),
        dra_unpublished=dra_unpublished(gpu_class),
        cpu_milli=int(defaults["cpu_milli"]),
        memory_mib=int(defaults["memory_mib"]),
        actor_id=actor.pk,
        topology_levels=tuple(name for name, _label in settings.SCHEDULING_TOPOLOGY_LEVELS),
        secrets=tuple(secrets_usable_by(actor, team)),
        reserved_env=(
            rules.DEFAULT_RESERVED_ENV
            if settings.ENV_RESERVED is None
            else rules.ReservedEnv.of(settings.ENV_RESERVED)
        ),
        datasets=tuple(team_datasets(team)),
        admin=platform_may(actor, Act.ACT_FOR_TEAMS),
        policy=team_policy_spec(team),
        budget=budget_state(team),
        image_clusters=on_nodes.get(image.name, ()),
        images_there=there,
    )
