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


def policy_summaries(teams: list[Team]) -> dict[int, list[str]]:
    """Team id → its policy in short lines, for the teams that have one."""
    policies = (
        TeamPolicy.objects.filter(team__in=teams)
        .select_related("team")
        .prefetch_related("allowed_classes", "allowed_images", "exclusive_classes")
    )
    return {p.team_id: core.summary(p.spec()) for p in policies}
