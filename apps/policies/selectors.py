from __future__ import annotations

from apps.accounts.models import Team
from apps.policies import core
from apps.policies.models import TeamPolicy


def team_policy(team: Team) -> TeamPolicy | None:
    return (
        TeamPolicy.objects.filter(team=team)
        .select_related("team", "updated_by")
        .prefetch_related("allowed_classes", "allowed_images", "exclusive_classes")
        .first()
    )


def team_policy_spec(team: Team) -> core.PolicySpec | None:
    """The team's policy as the request rules read it; None when it has none."""
    policy = team_policy(team)
    return policy.spec() if policy is not None else None
