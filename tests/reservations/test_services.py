"""Reservations on the database: booking, conflicts, approval above the threshold, the window
held in the scheduler's snapshot, and reserved capacity left unused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import override_settings
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.catalog.models import GpuClass
from apps.notifications.models import Notice
from apps.reservations.models import Reservation
from apps.reservations.selectors import calendar, effective_limits, effective_quota
from apps.reservations.services import (
    reservation_book,
    reservation_boundaries_apply,
    reservation_cancel,
    reservation_decide,
)
from apps.scheduling.selectors import reservation_uses, scheduling_snapshot
from apps.workloads import core as workload_core
from tests.factories import GpuClassFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def top_of_hour(hours: int = 0) -> object:
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    return now + (hours + 1) * HOUR


def book(cast: Cast, count: int, start_h: int, length_h: int, **kw: object) -> Reservation:
    start = top_of_hour(start_h)
    args: dict[str, object] = {
        "actor": cast.lead,
        "team": cast.team,
        "gpu_class": cast.gpu_class,
        "size_milli": 1000,
        "count": count,
        "starts_at": start,
        "ends_at": start + length_h * HOUR,  # type: ignore[operator]
        "note": "workshop",
    }
    args.update(kw)
    return reservation_book(**args)  # type: ignore[arg-type]


def test_bookings_within_the_threshold_are_approved_and_above_it_wait_for_an_admin(
    cast: Cast,
) -> None:
    small = book(cast, 8, 1, 3)
    assert small.state == Reservation.State.APPROVED
    big = book(cast, 9, 10, 3)
    assert big.state == Reservation.State.PENDING
    with pytest.raises(PermissionDenied):
        reservation_decide(actor=cast.lead, reservation=big, approve=True)
    approved = reservation_decide(actor=cast.admin, reservation=big, approve=True, comment="ok")
    assert approved.state == Reservation.State.APPROVED
    (told,) = Notice.objects.filter(key=f"reservation-{big.pk}-decided")
    assert told.user == cast.lead and told.event == "reservation_decided"
    assert told.title == "Reservation approved: 9 GPU of H100-80GB" and "Comment: ok" in told.body
    assert list(
        AuditEvent.objects.filter(action__startswith="reservation.")
        .order_by("id")
        .values_list("action", flat=True)
    ) == ["reservation.create", "reservation.create", "reservation.approve"]


def test_a_booking_above_free_capacity_is_refused_and_the_calendar_shows_why(cast: Cast) -> None:
    # 32 GPUs, 4 + 4 guaranteed: 24 free to book.
    book(cast, 8, 1, 4)
    book(cast, 8, 2, 4)
    with pytest.raises(ValidationError) as info:
        book(cast, 9, 3, 1)
    assert "Only 8 GPU of H100-80GB is free for the whole window" in str(info.value)
    assert book(cast, 8, 3, 1).state == Reservation.State.APPROVED  # exactly what is left
    hours = calendar(cast.gpu_class, start=top_of_hour(0), hours=8)  # type: ignore[arg-type]
    assert [h.free_milli // 1000 for h in hours] == [24, 16, 8, 0, 8, 16, 24, 24]
    assert [h.booked_milli // 1000 for h in hours] == [0, 8, 16, 24, 16, 8, 0, 0]


def test_pending_bookings_hold_their_place_and_rejected_ones_free_it(cast: Cast) -> None:
    pending = book(cast, 20, 1, 2)
    with pytest.raises(ValidationError):
        book(cast, 8, 1, 1)
    reservation_decide(actor=cast.admin, reservation=pending, approve=False, comment="too many")
    assert book(cast, 8, 1, 1).state == Reservation.State.APPROVED


def test_members_and_outsiders_cannot_book_and_bad_bookings_name_the_field(cast: Cast) -> None:
    with pytest.raises(PermissionDenied):
        book(cast, 1, 1, 1, actor=cast.owner)
    with pytest.raises(PermissionDenied):
        book(cast, 1, 1, 1, actor=cast.outsider)
    with pytest.raises(ValidationError) as info:
        book(cast, 0, 1, 1, size_milli=250)
    assert set(info.value.message_dict) == {"size", "count"}
    with pytest.raises(ValidationError) as info:
        book(cast, 1, 1, 24 * 15)
    assert "at most 14 days" in str(info.value)


def test_fractions_for_notebooks_on_a_shared_class(cast: Cast) -> None:
    shared = GpuClassFactory(
        name="L40S-48GB",
        sharing_mode=GpuClass.Sharing.TIMESLICE,
        timeslice_replicas=4,
        capacity_gpus=4,
    )
    r = book(cast, 12, 1, 2, gpu_class=shared, size_milli=250)
    assert r.total_milli == 3000 and r.amount_label == "12 × 0.25 GPU"
    assert r.state == Reservation.State.APPROVED


def test_the_window_is_held_for_the_team_only_while_open(cast: Cast) -> None:
    r = book(cast, 6, 1, 2)
    start, end = r.starts_at, r.ends_at
    for t, expected in [(start - HOUR, ()), (start, (6000,)), (end, ())]:
        snap = scheduling_snapshot(now=t, half_life_seconds=3600)
        assert tuple(b.milli for b in snap.reservations) == expected
    during = effective_quota(cast.team, cast.gpu_class, user=cast.owner, now=start)
    assert during is not None and (during.guaranteed_milli, during.limit_milli) == (10000, 14000)
    assert [(c.name, limit) for c, limit in effective_limits(cast.team, now=start)] == [
        ("H100-80GB", 14000)
    ]
    assert reservation_boundaries_apply(now=start) == (1, 0)
    assert reservation_boundaries_apply(now=end) == (0, 1)
    assert reservation_boundaries_apply(now=end) == (0, 0)


def test_withdrawing_frees_the_capacity_and_only_the_team_may(cast: Cast) -> None:
    r = book(cast, 24, 1, 2)
    reservation_decide(actor=cast.admin, reservation=r, approve=True)
    with pytest.raises(PermissionDenied):
        reservation_cancel(actor=cast.outsider, reservation=r)
    reservation_cancel(actor=cast.lead, reservation=r)
    assert book(cast, 8, 1, 1).state == Reservation.State.APPROVED
    with pytest.raises(ValidationError):
        reservation_cancel(actor=cast.lead, reservation=r)


@override_settings(RESERVATION_APPROVAL_THRESHOLD_GPUS=100)
def test_unused_reserved_capacity_is_reported(cast: Cast) -> None:
    r = book(cast, 4, 1, 4)
    start = r.starts_at
    # The team ran 1 GPU for the first two hours of its 4-GPU window; another team's use and
    # work of another class do not count.
    WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        state=workload_core.SUCCEEDED,
        admitted_at=start - HOUR,
        finished_at=start + 2 * HOUR,
    )
    WorkloadFactory(
        team=cast.other_team,
        owner=cast.outsider,
        gpu_class=cast.gpu_class,
        state=workload_core.RUNNING,
        gpu_milli=4000,
        admitted_at=start,
    )
    (row,) = reservation_uses([r], now=start + 4 * HOUR)
    assert row.use.reserved_gpu_hours == 16.0
    assert row.use.used_gpu_hours == 2.0
    assert row.use.unused_gpu_hours == 14.0 and row.use.used_percent == 12.5
