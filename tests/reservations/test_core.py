"""Reservations on plain data: free capacity per hour, conflicts, approval, and use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.reservations.core import (
    Booking,
    Commitment,
    Interval,
    booking_errors,
    conflict,
    free_capacity,
    hourly,
    needs_approval,
    peak,
    reservation_use,
)

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
H = timedelta(hours=1)


def c(milli: int, start_h: float, end_h: float) -> Commitment:
    return Commitment(milli, T0 + start_h * H, T0 + end_h * H)


def test_peak_is_the_most_committed_at_any_instant() -> None:
    # 9:00–12:00 and 11:00–13:00 overlap only 11–12.
    both = [c(4000, 9, 12), c(3000, 11, 13)]
    assert peak(both, T0 + 9 * H, T0 + 13 * H) == 7000
    assert peak(both, T0 + 9 * H, T0 + 11 * H) == 4000
    assert peak(both, T0 + 12 * H, T0 + 14 * H) == 3000
    assert peak(both, T0 + 13 * H, T0 + 14 * H) == 0  # the end is exclusive


def test_a_booking_above_what_is_free_is_refused_with_the_figures() -> None:
    existing = [c(4000, 9, 12)]
    why = conflict(
        milli=3000,
        capacity_milli=8000,
        guaranteed_milli=2000,
        commitments=existing,
        start=T0 + 10 * H,
        end=T0 + 11 * H,
        class_name="H100",
    )
    assert why is not None and "Only 2 GPU of H100 is free" in why and "books 3 GPU" in why
    assert (
        conflict(
            milli=3000,
            capacity_milli=8000,
            guaranteed_milli=2000,
            commitments=existing,
            start=T0 + 12 * H,
            end=T0 + 14 * H,
            class_name="H100",
        )
        is None
    )


def test_hourly_view_shows_free_and_booked_capacity() -> None:
    hours = hourly(
        capacity_milli=8000,
        guaranteed_milli=2000,
        commitments=[],
        bookings=[c(4000, 1, 2), c(500, 1.5, 3)],
        start=T0,
        hours=4,
    )
    assert [(h.free_milli, h.booked_milli) for h in hours] == [
        (6000, 0),
        (1500, 4500),
        (5500, 500),
        (6000, 0),
    ]


def test_malformed_bookings_get_one_message_per_field() -> None:
    errors = booking_errors(
        size_milli=250,
        count=0,
        start=T0,
        end=T0,
        now=T0 + 2 * H,
        whole_only=True,
        max_days=14,
    )
    assert set(errors) == {"size", "count", "ends_at", "starts_at"}
    assert (
        booking_errors(
            size_milli=250, count=20, start=T0, end=T0 + H, now=T0, whole_only=False, max_days=14
        )
        == {}
    )
    assert (
        "14 days"
        in booking_errors(
            size_milli=1000,
            count=1,
            start=T0,
            end=T0 + 15 * 24 * H,
            now=T0,
            whole_only=True,
            max_days=14,
        )["ends_at"]
    )


def test_only_bookings_above_the_threshold_wait_for_an_admin() -> None:
    assert not needs_approval(8000, threshold_milli=8000)
    assert needs_approval(8001, threshold_milli=8000)


def test_use_counts_the_teams_use_up_to_the_amount_reserved() -> None:
    booking = Booking(1, "vision", "H100", 4000, T0, T0 + 4 * H)
    usage = [
        Interval(2000, T0 - H, T0 + 2 * H),  # 2 GPUs for the first two hours
        Interval(8000, T0 + 3 * H, None),  # 8 GPUs from 3:00: only 4 count
    ]
    use = reservation_use(booking, usage, now=T0 + 10 * H)
    assert use.reserved_gpu_hours == 16.0
    assert use.used_gpu_hours == 2 * 2 + 4 * 1
    assert use.unused_gpu_hours == 8.0 and use.used_percent == 50.0
    # Before the window nothing is held yet; halfway, only the hours so far.
    assert reservation_use(booking, usage, now=T0 - H).reserved_gpu_hours == 0
    assert reservation_use(booking, usage, now=T0 + H).reserved_gpu_hours == 4.0


bookings = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=12).map(lambda n: n * 500),
        st.integers(min_value=0, max_value=47),
        st.integers(min_value=1, max_value=24),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(min_value=0, max_value=16).map(lambda n: n * 1000),
    guaranteed=st.integers(min_value=0, max_value=8).map(lambda n: n * 1000),
    asks=bookings,
)
def test_accepted_bookings_never_exceed_capacity_at_any_instant(
    capacity: int, guaranteed: int, asks: list[tuple[int, int, int]]
) -> None:
    """Whatever is asked in whatever order, what is accepted plus the guarantees fits the
    capacity at every instant (checked independently, minute by minute)."""
    accepted: list[Commitment] = []
    for milli, start_h, length in asks:
        start, end = T0 + start_h * H, T0 + (start_h + length) * H
        if (
            conflict(
                milli=milli,
                capacity_milli=capacity,
                guaranteed_milli=guaranteed,
                commitments=accepted,
                start=start,
                end=end,
                class_name="H100",
            )
            is None
        ):
            accepted.append(Commitment(milli, start, end))
    for minute in range(0, 72 * 60, 30):
        t = T0 + timedelta(minutes=minute)
        load = sum(a.milli for a in accepted if a.start <= t < a.end)
        assert not accepted or guaranteed + load <= capacity
    # And what the calendar calls free is exactly what one more booking may take.
    for h in hourly(
        capacity_milli=capacity,
        guaranteed_milli=guaranteed,
        commitments=[],
        bookings=accepted,
        start=T0,
        hours=72,
    ):

        def fits(milli: int, start: datetime = h.start) -> bool:
            why = conflict(
                milli=milli,
                capacity_milli=capacity,
                guaranteed_milli=guaranteed,
                commitments=accepted,
                start=start,
                end=start + H,
                class_name="H100",
            )
            return why is None

        assert fits(h.free_milli)
        assert not fits(h.free_milli + 1)


def test_free_capacity_never_goes_negative_when_guarantees_overcommit() -> None:
    assert (
        free_capacity(
            capacity_milli=4000, guaranteed_milli=6000, commitments=[], start=T0, end=T0 + H
        )
        == 0
    )
