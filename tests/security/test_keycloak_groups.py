"""Tried with a stock Keycloak realm: with the default OIDC_GROUPS_FORMAT=auto and Keycloak's
default full-path groups (``/team-vision``), nobody got a team, and that was logged only at
INFO. A top-level path now matches the team's group written as a name, a nested one never
matches by its last segment, and a sign-in whose groups map to nothing is a WARNING."""

from __future__ import annotations

import logging

import pytest

from apps.accounts import core
from apps.accounts.services import _log_groups
from tests.factories import UserFactory

TEAM = core.TeamGroups(team_id=1, member_group="team-vision", lead_group="team-vision-leads")


def _plan(*groups: str, admin: tuple[str, ...] = ("gpupaas-admins",)) -> core.MembershipPlan:
    return core.plan_memberships(
        groups=groups,
        teams=[TEAM],
        current_idp_team_ids=[],
        admin_groups=admin,
        groups_format=core.GROUPS_FORMAT_AUTO,
    )


def test_keycloak_full_path_groups_give_the_team_in_auto_format() -> None:
    assert _plan("/team-vision").roles == {1: core.ROLE_MEMBER}
    assert _plan("/team-vision-leads/").roles == {1: core.ROLE_LEAD}
    assert _plan("/gpupaas-admins").is_admin


def test_nested_group_never_matches_a_team_by_its_last_segment_in_auto_format() -> None:
    assert _plan("/contractors/team-vision").roles == {}
    assert not _plan("/contractors/gpupaas-admins").is_admin


def test_configured_path_still_matches_only_that_path_in_auto_format() -> None:
    team = core.TeamGroups(team_id=2, member_group="/ml/vision")
    plan = core.plan_memberships(
        groups=["vision", "/vision"],
        teams=[team],
        current_idp_team_ids=[],
        admin_groups=[],
        groups_format=core.GROUPS_FORMAT_AUTO,
    )
    assert plan.roles == {}


@pytest.mark.django_db
def test_sign_in_whose_groups_map_to_no_team_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="apps.accounts")
    claim = core.GroupsClaim(groups=("/ml/other",), shape="list")
    _log_groups(
        user=UserFactory(), when="sign-in", claim=claim, plan=_plan("/ml/other"), fmt="auto"
    )
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no group maps to a team" in r.getMessage() for r in warnings)
    assert any("/ml/other" in r.getMessage() for r in warnings)
