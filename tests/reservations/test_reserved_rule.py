"""What an open reservation adds to its team's quota has one definition
(``apps.reservations.core.with_reserved`` over ``reserved_by_team_class``); the database reads
select the open bookings with a query. These tests hold the query's window to
``Booking.active`` at the boundaries, and the quota pages' numbers to the scheduler's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Team
from apps.quotas.core import QuotaNumbers
from apps.reservations.core import Booking, reserved_by_team_class, with_reserved
from apps.reservations.models import Reservation
from apps.reservations.selectors import effective_quota, open_at
from apps.scheduling.governance import effective_quotas
from apps.scheduling.selectors import scheduling_snapshot
from tests.factories import TeamFactory
from tests.plugins.cast import Cast

HOUR = timedelta(hours=1)
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def test_a_reservation_grows_guarantee_limit_and_cap_by_what_it_holds() -> None:
    assert with_reserved(QuotaNumbers(4000, 8000, 2000), 3000) == QuotaNumbers(7000, 11000, 5000)
    assert with_reserved(QuotaNumbers(4000, 8000, None), 3000) == QuotaNumbers(7000, 11000, None)
    assert with_reserved(None, 3000) == QuotaNumbers(3000, 3000, None)  # no quota: just that
    assert with_reserved(None, 0) is None
    assert with_reserved(QuotaNumbers(4000, 8000), 0) == QuotaNumbers(4000, 8000)


def test_only_bookings_open_at_the_instant_are_held_and_they_add_up_per_team_and_class() -> None:
    bookings = [
        Booking(1, "vision", "H100", 2000, T0, T0 + HOUR),
        Booking(2, "vision", "H100", 1000, T0 - HOUR, T0),  # ended at T0: end exclusive
        Booking(3, "vision", "H100", 500, T0 - HOUR, T0 + HOUR),
        Booking(4, "nlp", "H100", 4000, T0 + timedelta(seconds=1), T0 + HOUR),
        Booking(5, "vision", "A100", 1000, T0, T0 + HOUR),
    ]
    assert reserved_by_team_class(bookings, now=T0) == {
        ("vision", "H100"): 2500,
        ("vision", "A100"): 1000,
    }


def reserve(cast: Cast, team: Team, milli: int, start: datetime, end: datetime, state: str) -> int:
    r = Reservation.objects.create(
        team=team,
        gpu_class=cast.gpu_class,
        requested_by=cast.lead,
        size_milli=1000,
        count=milli // 1000,
        total_milli=milli,
        starts_at=start,
        ends_at=end,
        state=state,
    )
    return r.pk


@pytest.mark.django_db
def test_the_query_of_open_bookings_agrees_with_booking_active_at_the_boundaries(
    cast: Cast,
) -> None:
    t = timezone.now().replace(microsecond=0) + HOUR
    tick = timedelta(microseconds=1)
    approved = Reservation.State.APPROVED
    rows = [
        reserve(cast, cast.team, 1000, t, t + HOUR, approved),  # starts at t
        reserve(cast, cast.team, 2000, t - HOUR, t, approved),  # ends at t
        reserve(cast, cast.team, 3000, t + tick, t + HOUR, approved),  # just after t
        reserve(cast, cast.team, 4000, t - HOUR, t + tick, approved),  # just before its end
        reserve(cast, cast.other_team, 1000, t - HOUR, t + HOUR, approved),
        reserve(cast, cast.team, 5000, t - HOUR, t + HOUR, Reservation.State.PENDING),
    ]
    for at in (t - tick, t, t + tick):
        by_query = set(open_at(at).values_list("pk", flat=True))
        by_rule = {
            r.pk
            for r in Reservation.objects.filter(pk__in=rows, state=approved)
            if r.booking().active(at)
        }
        assert by_query == by_rule, at


@pytest.mark.django_db
def test_the_quota_in_effect_on_the_pages_is_the_one_the_scheduler_uses(cast: Cast) -> None:
    t = timezone.now().replace(microsecond=0) + HOUR
    no_quota: Team = TeamFactory(name="Audio")  # type: ignore[assignment]
    approved = Reservation.State.APPROVED
    reserve(cast, cast.team, 2000, t, t + 2 * HOUR, approved)
    reserve(cast, cast.team, 1000, t + HOUR, t + 3 * HOUR, approved)
    reserve(cast, cast.other_team, 3000, t - HOUR, t + HOUR, Reservation.State.PENDING)
    reserve(cast, no_quota, 4000, t, t + HOUR, approved)
    for at in (t - HOUR, t, t + HOUR, t + 2 * HOUR, t + 3 * HOUR):
        snap = scheduling_snapshot(now=at, half_life_seconds=3600)
        scheduler = effective_quotas(snap.quotas, snap.grants, snap.reservations, at)
        for team in (cast.team, cast.other_team, no_quota):
            page = effective_quota(team, cast.gpu_class, user=None, now=at)
            theirs = scheduler.get((team.name, cast.gpu_class.name))
            if theirs is None:
                assert page is None, (team.name, at)
                continue
            assert page is not None, (team.name, at)
            numbers = (page.guaranteed_milli, page.limit_milli, page.per_user_cap_milli)
            assert numbers == (
                theirs.guaranteed_milli,
                theirs.limit_milli,
                theirs.per_user_cap_milli,
            ), (team.name, at)
    during = effective_quota(no_quota, cast.gpu_class, user=None, now=t)
    assert during == QuotaNumbers(4000, 4000, None)
