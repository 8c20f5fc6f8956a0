from __future__ import annotations

from django.db.models import QuerySet

from apps.accounts.models import User
from apps.workloads.models import Workload


def workloads_visible_to(user: User) -> QuerySet[Workload]:
    """Workloads the user may see: their teams' (owner, teammates, leads); all for admins."""
    qs = Workload.objects.select_related("owner", "team", "gpu_class", "image")
    if user.is_staff:
        return qs
    return qs.filter(team__memberships__user=user)


def workload_for_user(user: User, workload_id: int) -> Workload:
    """One workload the user may see; ``Workload.DoesNotExist`` (→ 404) for anyone else's."""
    return workloads_visible_to(user).get(pk=workload_id)
