"""Reservations on plain data: what is free per hour, which bookings fit, what was used.

A class's capacity is committed to the teams' guarantees (base and granted) and to
reservations; a booking fits if, at every instant of its window, guarantees and overlapping
bookings plus it stay within the capacity. Amounts are milli-GPU, times timezone-aware; no
clock is read here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import overload

from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec
from apps.catalog.resources import ResourceMappingError, charged_milli
from apps.quotas.core import QuotaNumbers, format_milli

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Booking:
    """A team's hold on ``milli`` of a class during ``[start, end)``."""

    id: int
    team: str
    gpu_class: str
    milli: int
    start: datetime
    end: datetime

    def active(self, now: datetime) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True)
class Commitment:
    """Capacity promised to someone during ``[start, end)`` (a booking, a granted guarantee)."""

    milli: int
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Interval:
    """A span of use, ``end`` None: still running."""

    milli: int
    start: datetime
    end: datetime | None


def peak(commitments: Iterable[Commitment], start: datetime, end: datetime) -> int:
    """The most committed at any instant of ``[start, end)``.

    The load only rises where a commitment starts, so the maximum is at ``start`` or at one of
    those starts inside the window."""
    inside = [c for c in commitments if c.start < end and c.end > start and c.milli > 0]
    points = {start, *(c.start for c in inside if c.start > start)}
    return max((sum(c.milli for c in inside if c.start <= t < c.end) for t in points), default=0)


def free_capacity(
    *,
    capacity_milli: int,
    guaranteed_milli: int,
    commitments: Iterable[Commitment],
    start: datetime,
    end: datetime,
) -> int:
    """What can still be booked for the whole of ``[start, end)`` (never below 0)."""
    return max(0, capacity_milli - guaranteed_milli - peak(commitments, start, end))


@dataclass(frozen=True)
class Hour:
    start: datetime
    free_milli: int
    booked_milli: int


def hourly(
    *,
    capacity_milli: int,
    guaranteed_milli: int,
    commitments: Sequence[Commitment],
    bookings: Sequence[Commitment],
    start: datetime,
    hours: int,
) -> list[Hour]:
    """Per hour from ``start``: what is free for the whole hour and the most booked in it."""
    out = []
    for i in range(hours):
        h = start + i * HOUR
        booked = peak(bookings, h, h + HOUR)
        free = free_capacity(
            capacity_milli=capacity_milli,
            guaranteed_milli=guaranteed_milli,
            commitments=[*commitments, *bookings],
            start=h,
            end=h + HOUR,
        )
        out.append(Hour(h, free, booked))
    return out


def sold_units(gpu: GpuClassSpec) -> tuple[int, ...]:
    """The sizes of one unit (milli-GPU, at most one GPU) the class sells: what the cluster
    grants a request, so what a reservation of that size holds exactly. Whole GPUs only for a
    class that is not shared; 1/R … R/R of a GPU time-sliced R ways; the MIG instances offered;
    a vGPU (HAMi) class sells any fraction, so it has no list (empty)."""
    if gpu.sharing_mode == catalog_core.SHARING_HAMI:
        return ()
    units: set[int] = set()
    for milli in range(1, 1001):
        try:
            units.add(charged_milli(milli, gpu))
        except ResourceMappingError:
            continue
    return tuple(sorted(units))


def unit_error(size_milli: int, gpu: GpuClassSpec) -> str | None:
    """Why a unit of ``size_milli`` is not what ``gpu`` sells (None: it is). A unit the class
    does not sell would hold capacity no request can use whole (0.3 GPU of a class sold in
    quarters holds 0.3 but every workload of that size is charged 0.5)."""
    units = sold_units(gpu)
    if not units or size_milli in units:
        return None
    listed = ", ".join(format_milli(u) for u in units)
    if gpu.sharing_mode == catalog_core.SHARING_TIMESLICE:
        slices = gpu.timeslice_replicas or 1
        what = f"time slices of 1/{slices} GPU"
    elif gpu.sharing_mode == catalog_core.SHARING_MIG:
        what = "MIG instances (" + ", ".join(gpu.mig_profiles) + ")"
    else:
        what = "whole GPUs"
    return f"{gpu.name} is sold in {what}: book units of {listed} GPU."


def booking_errors(
    *,
    size_milli: int,
    count: int,
    start: datetime,
    end: datetime,
    now: datetime,
    whole_only: bool,
    max_days: int,
) -> dict[str, str]:
    """Field → message for a booking that is malformed whatever the capacity."""
    errors: dict[str, str] = {}
    if size_milli <= 0 or size_milli > 1000:
        errors["size"] = "Book whole GPUs (1) or a fraction of one (e.g. 0.25) per unit."
    elif whole_only and size_milli != 1000:
        errors["size"] = "This class is not shared: book whole GPUs."
    if count < 1:
        errors["count"] = "Book at least one."
    elif count > 10_000:
        errors["count"] = "At most 10000 at once."
    if end <= start:
        errors["ends_at"] = "The end must be after the start."
    elif end - start > timedelta(days=max_days):
        errors["ends_at"] = f"A reservation lasts at most {max_days} days."
    if start < now - timedelta(minutes=5):
        errors["starts_at"] = "The start is in the past."
    return errors


def conflict(
    *,
    milli: int,
    capacity_milli: int,
    guaranteed_milli: int,
    commitments: Iterable[Commitment],
    start: datetime,
    end: datetime,
    class_name: str,
) -> str | None:
    """Why a booking of ``milli`` does not fit in ``[start, end)``, or None."""
    free = free_capacity(
        capacity_milli=capacity_milli,
        guaranteed_milli=guaranteed_milli,
        commitments=commitments,
        start=start,
        end=end,
    )
    if milli <= free:
        return None
    return (
        f"Only {format_milli(free)} GPU of {class_name} is free for the whole window (capacity "
        f"{format_milli(capacity_milli)} GPU, less guarantees and other reservations); this "
        f"books {format_milli(milli)} GPU. Pick another time or book less."
    )


def needs_approval(milli: int, *, threshold_milli: int) -> bool:
    """Bookings above the threshold wait for a platform admin (0: every booking waits)."""
    return milli > threshold_milli


@dataclass(frozen=True)
class Use:
    reserved_gpu_hours: float
    used_gpu_hours: float

    @property
    def unused_gpu_hours(self) -> float:
        return max(0.0, self.reserved_gpu_hours - self.used_gpu_hours)

    @property
    def used_percent(self) -> float:
        if self.reserved_gpu_hours <= 0:
            return 0.0
        return round(100.0 * self.used_gpu_hours / self.reserved_gpu_hours, 1)


def reservation_use(booking: Booking, usage: Iterable[Interval], *, now: datetime) -> Use:
    """GPU-hours held and used of a booking up to ``now``: at each instant the team's use of the
    class counts up to the amount reserved (use beyond it is ordinary quota)."""
    end = min(booking.end, now)
    if end <= booking.start:
        return Use(0.0, 0.0)
    spans = []
    for u in usage:
        s = max(u.start, booking.start)
        e = min(u.end or end, end)
        if e > s and u.milli > 0:
            spans.append((s, e, u.milli))
    points = sorted({booking.start, end, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    used = 0.0
    for a, b in pairwise(points):
        load = sum(m for s, e, m in spans if s <= a < e)
        used += min(load, booking.milli) / 1000 * (b - a).total_seconds() / 3600
    held = booking.milli / 1000 * (end - booking.start).total_seconds() / 3600
    return Use(round(held, 3), round(used, 3))


# --- what an open reservation adds to its team's quota ---------------------------------------


def reserved_by_team_class(
    bookings: Iterable[Booking], *, now: datetime
) -> dict[tuple[str, str], int]:
    """(team, class) → milli-GPU held by the bookings open at ``now``.

    The one definition of what a team holds by reservations: the scheduler's cycle, the quota
    pages and the request checks all compute through it and :func:`with_reserved`."""
    held: dict[tuple[str, str], int] = defaultdict(int)
    for b in bookings:
        if b.active(now) and b.milli > 0:
            held[(b.team, b.gpu_class)] += b.milli
    return dict(held)


def reserved_milli(bookings: Iterable[Booking], *, team: str, gpu_class: str, now: datetime) -> int:
    """What ``team`` holds of ``gpu_class`` by the bookings open at ``now`` (milli-GPU)."""
    return reserved_by_team_class(bookings, now=now).get((team, gpu_class), 0)


@overload
def with_reserved(numbers: QuotaNumbers, reserved: int) -> QuotaNumbers: ...
@overload
def with_reserved(numbers: QuotaNumbers | None, reserved: int) -> QuotaNumbers | None: ...
def with_reserved(numbers: QuotaNumbers | None, reserved: int) -> QuotaNumbers | None:
    """The quota in effect while its team holds ``reserved`` by open reservations: guarantee,
    limit and per-user cap each grow by it (no cap stays no cap). A team without a quota of
    the class gets one of just what it reserved; nothing reserved changes nothing."""
    if reserved <= 0:
        return numbers
    if numbers is None:
        return QuotaNumbers(reserved, reserved, None)
    cap = numbers.per_user_cap_milli
    return QuotaNumbers(
        numbers.guaranteed_milli + reserved,
        numbers.limit_milli + reserved,
        None if cap is None else cap + reserved,
    )
