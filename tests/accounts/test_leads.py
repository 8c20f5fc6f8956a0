"""The teams a user leads: one selector every door asks (the overview, the reservations page,
the workloads list's cancel boxes), read once per request's user."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.models import Membership
from apps.accounts.selectors import forget_team_copies, team_ids_led_by, teams_led_by
from apps.accounts.services import membership_set
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_a_lead_leads_their_team_and_members_lead_none(cast: Cast) -> None:
    assert list(teams_led_by(cast.lead)) == [cast.team]
    assert team_ids_led_by(cast.lead) == {cast.team.pk}
    for member in (cast.owner, cast.teammate, cast.outsider):
        assert not teams_led_by(member).exists()
        assert team_ids_led_by(member) == frozenset()


def test_a_platform_admin_leads_no_team_here(cast: Cast) -> None:
    # Admins may act as leads everywhere; a caller that lets them says so itself.
    assert not teams_led_by(cast.admin).exists()


def test_the_led_team_ids_are_read_once_per_user_object(
    cast: Cast, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(1):
        team_ids_led_by(cast.lead)
        team_ids_led_by(cast.lead)


def test_a_membership_change_drops_the_copy(cast: Cast) -> None:
    assert team_ids_led_by(cast.teammate) == frozenset()
    membership_set(actor=cast.admin, team=cast.team, user=cast.teammate, role=Membership.Role.LEAD)
    assert team_ids_led_by(cast.teammate) == {cast.team.pk}
    forget_team_copies(cast.teammate)
    assert team_ids_led_by(cast.teammate) == {cast.team.pk}
