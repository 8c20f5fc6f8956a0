"""Reads of reservations: the calendar, what a booking is checked against, the quota in effect."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet, Sum

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_ids_of
from apps.catalog.models import ClusterNode, GpuClass
from apps.quotas import selectors as quota_selectors
from apps.quotas.core import QuotaNumbers, format_milli
from apps.quotas.models import QuotaRequest
from apps.reservations import core
from apps.reservations.models import Reservation


def capacity_milli(gpu_class: GpuClass) -> int:
    """The class's capacity for planning: the known capacity an admin recorded, else the GPUs
    of its nodes in enabled clusters (a node down for an hour does not cancel bookings)."""
    if gpu_class.capacity_gpus > 0:
        return gpu_class.capacity_milli
    total = ClusterNode.objects.filter(cluster__enabled=True, gpu_class=gpu_class).aggregate(
        s=Sum("gpu_count")
    )["s"]
    return int(total or 0) * 1000


def holding(gpu_class: GpuClass, *, start: datetime, end: datetime) -> QuerySet[Reservation]:
    """Bookings of the class that hold capacity somewhere in ``[start, end)``."""
    return Reservation.objects.filter(
        gpu_class=gpu_class, state__in=Reservation.HOLDING, starts_at__lt=end, ends_at__gt=start
    )


def commitments(
    gpu_class: GpuClass, *, start: datetime, end: datetime, exclude: int | None = None
) -> tuple[list[core.Commitment], list[core.Commitment]]:
    """(granted guarantees, bookings) of the class overlapping ``[start, end)``."""
    granted = [
        core.Commitment(g.amount_milli, g.start, g.end)
        for g in quota_selectors.team_guarantee_grants(gpu_class, start=start, end=end)
    ]
    booked = holding(gpu_class, start=start, end=end)
    if exclude is not None:
        booked = booked.exclude(pk=exclude)
    return granted, [r.commitment() for r in booked]


def booking_conflict(
    gpu_class: GpuClass, *, milli: int, start: datetime, end: datetime, exclude: int | None = None
) -> str | None:
    granted, booked = commitments(gpu_class, start=start, end=end, exclude=exclude)
    return core.conflict(
        milli=milli,
        capacity_milli=capacity_milli(gpu_class),
        guaranteed_milli=quota_selectors.guaranteed_total(gpu_class),
        commitments=[*granted, *booked],
        start=start,
        end=end,
        class_name=gpu_class.name,
    )


def calendar(gpu_class: GpuClass, *, start: datetime, hours: int) -> list[core.Hour]:
    """Free and booked capacity of the class per hour from ``start``."""
    end = start + hours * core.HOUR
    granted, booked = commitments(gpu_class, start=start, end=end)
    return core.hourly(
        capacity_milli=capacity_milli(gpu_class),
        guaranteed_milli=quota_selectors.guaranteed_total(gpu_class),
        commitments=granted,
        bookings=booked,
        start=start,
        hours=hours,
    )


def quota_request_capacity_note(request: QuotaRequest) -> str | None:
    """For a team request: a warning when it asks for more than is free in its period (capacity
    less every guarantee, grant and booking), shown before anyone approves it."""
    if request.kind != QuotaRequest.Kind.TEAM:
        return None
    granted, booked = commitments(request.gpu_class, start=request.starts_at, end=request.ends_at)
    own = getattr(request, "grant", None)
    if own is not None:  # approved: do not count it against itself
        granted = [
            c
            for c in granted
            if (c.milli, c.start, c.end) != (own.amount_milli, own.starts_at, own.ends_at)
        ]
    capacity = capacity_milli(request.gpu_class)
    free = core.free_capacity(
        capacity_milli=capacity,
        guaranteed_milli=quota_selectors.guaranteed_total(request.gpu_class),
        commitments=[*granted, *booked],
        start=request.starts_at,
        end=request.ends_at,
    )
    if request.amount_milli <= free:
        return None
    return (
        f"Above available capacity: only {format_milli(free)} GPU of {request.gpu_class.name} "
        f"is free for the whole period (capacity {format_milli(capacity)} GPU, less guarantees, "
        f"grants and reservations); this asks for {format_milli(request.amount_milli)} GPU. "
        "Approving it promises guarantees that cannot all be honoured at once."
    )


def open_at(now: datetime) -> QuerySet[Reservation]:
    """Approved bookings whose window ``[starts_at, ends_at)`` is open at ``now``: the query form
    of :meth:`apps.reservations.core.Booking.active` (tests/reservations hold the two to the
    same instants)."""
    return Reservation.objects.filter(
        state=Reservation.State.APPROVED, starts_at__lte=now, ends_at__gt=now
    )


def active_bookings(*, now: datetime) -> list[core.Booking]:
    """Approved bookings whose window is open at ``now``, as the scheduler takes them."""
    qs = open_at(now).select_related("team", "gpu_class")
    return [r.booking() for r in qs.order_by("id")]


def effective_quota(
    team: Team, gpu_class: GpuClass, *, user: User | None, now: datetime
) -> QuotaNumbers | None:
    """The quota in effect at ``now``: the base, the grants active then, and the team's open
    reservations of the class, added by the rule the scheduler's cycle uses
    (:func:`apps.reservations.core.with_reserved`)."""
    numbers = quota_selectors.effective_team_quota(team, gpu_class, user=user, now=now)
    rows = open_at(now).filter(team=team, gpu_class=gpu_class).select_related("team", "gpu_class")
    bookings = [r.booking() for r in rows]
    reserved = core.reserved_milli(bookings, team=team.name, gpu_class=gpu_class.name, now=now)
    return core.with_reserved(numbers, reserved)


def reservations_visible_to(user: User) -> QuerySet[Reservation]:
    """Admins see every booking; others those of their teams."""
    qs = Reservation.objects.select_related("team", "gpu_class", "requested_by", "decided_by")
    if platform_may(user, Act.SEE_TEAMS):
        return qs
    return qs.filter(team_id__in=team_ids_of(user))


def reservation_for_user(user: User, pk: int) -> Reservation:
    """The booking if ``user`` may see it; else DoesNotExist (a 404, never a leak)."""
    return reservations_visible_to(user).get(pk=pk)


def reservation_may_manage(user: User, reservation: Reservation) -> bool:
    """Who may withdraw it: whoever booked it, a lead of its team, an admin."""
    return reservation.requested_by_id == user.pk or is_team_lead(user, reservation.team_id)


def effective_limits(team: Team, *, now: datetime) -> list[tuple[GpuClass, int]]:
    """Per class the team has a quota or an open reservation of: its limit in effect at ``now``
    (what the cluster's ResourceQuota enforces again), classes by name."""
    classes = {q.gpu_class_id: q.gpu_class for q in team.quotas.select_related("gpu_class")}
    for r in open_at(now).filter(team=team).select_related("gpu_class"):
        classes.setdefault(r.gpu_class_id, r.gpu_class)
    out = []
    for gpu_class in sorted(classes.values(), key=lambda c: c.name):
        numbers = effective_quota(team, gpu_class, user=None, now=now)
        if numbers is not None:
            out.append((gpu_class, numbers.limit_milli))
    return out
