"""Writes of reservations: book, decide, withdraw, and act on windows that open or close."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass
from apps.common import taskqueue
from apps.reservations import core, notices
from apps.reservations.models import Reservation
from apps.reservations.selectors import booking_conflict


def _window_changed(reservation: Reservation) -> None:
    """The team's quota in effect changed now: the cluster's ResourceQuota and the next cycle
    follow."""
    taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(reservation.team_id)
    taskqueue.SCHEDULING_CYCLE.on_commit()


def reservation_book(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    size_milli: int,
    count: int,
    starts_at: datetime,
    ends_at: datetime,
    note: str = "",
    source_ip: str | None = None,
    now: datetime | None = None,
) -> Reservation:
    """A lead books capacity of a class for the team.

    Refused (ValidationError on ``count``) when it does not fit beside the guarantees, grants
    and other bookings at some instant of the window; above the approval threshold it waits for
    a platform admin, below it is approved at once."""
    now = now or timezone.now()
    if not is_team_lead(actor, team.pk):
        raise PermissionDenied("Only the team's leads and platform admins book capacity.")
    errors = core.booking_errors(
        size_milli=size_milli,
        count=count,
        start=starts_at,
        end=ends_at,
        now=now,
        whole_only=not gpu_class.shares_gpus,
        max_days=settings.RESERVATION_MAX_DAYS,
    )
    if "size" not in errors:
        wrong_unit = core.unit_error(size_milli, gpu_class.spec())
        if wrong_unit is not None:
            errors["size"] = wrong_unit
    if not gpu_class.enabled:
        errors.setdefault("gpu_class", f"{gpu_class.name} is not offered.")
    if len(note) > 500:
        errors["note"] = "At most 500 characters."
    if errors:
        raise ValidationError(errors)
    total = size_milli * count
    with transaction.atomic():
        # The race it prevents: two bookings of one class each reading the same free capacity
        # and both fitting alone but not together. Locking the class row serialises them.
        GpuClass.objects.select_for_update().get(pk=gpu_class.pk)
        why = booking_conflict(gpu_class, milli=total, start=starts_at, end=ends_at)
        if why is not None:
            raise ValidationError({"count": why})
        waits = core.needs_approval(
            total, threshold_milli=settings.RESERVATION_APPROVAL_THRESHOLD_GPUS * 1000
        )
        reservation = Reservation.objects.create(
            team=team,
            gpu_class=gpu_class,
            requested_by=actor,
            size_milli=size_milli,
            count=count,
            total_milli=total,
            starts_at=max(starts_at, now),
            ends_at=ends_at,
            note=note.strip(),
            state=Reservation.State.PENDING if waits else Reservation.State.APPROVED,
        )
        audit_record(
            actor=actor,
            action="reservation.create",
            obj=reservation,
            source_ip=source_ip,
            details={
                "total_milli": total,
                "starts_at": reservation.starts_at.isoformat(),
                "ends_at": ends_at.isoformat(),
                "state": reservation.state,
            },
        )
        if not waits and reservation.starts_at <= now:
            _window_changed(reservation)
    return reservation


def reservation_decide(
    *,
    actor: User,
    reservation: Reservation,
    approve: bool,
    comment: str = "",
    source_ip: str | None = None,
    now: datetime | None = None,
) -> Reservation:
    """A platform admin approves or rejects a booking that waits (above the threshold)."""
    now = now or timezone.now()
    if not platform_may(actor, Act.GOVERN_TEAMS):
        raise PermissionDenied("Platform admins decide bookings above the threshold.")
    if len(comment) > 2000:
        raise ValidationError({"comment": "At most 2000 characters."})
    with transaction.atomic():
        # The race it prevents: a double approval, or an approval racing a withdrawal.
        locked = Reservation.objects.select_for_update().get(pk=reservation.pk)
        if locked.state != Reservation.State.PENDING:
            raise ValidationError({"state": f"This booking is already {locked.state}."})
        if approve and locked.ends_at <= now:
            raise ValidationError({"state": "Its window is over: reject it."})
        locked.state = Reservation.State.APPROVED if approve else Reservation.State.REJECTED
        locked.decided_by = actor
        locked.decided_at = now
        locked.decision_comment = comment.strip()
        locked.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
        audit_record(
            actor=actor,
            action="reservation.approve" if approve else "reservation.reject",
            obj=locked,
            source_ip=source_ip,
            details={"comment": locked.decision_comment},
        )
        if approve and locked.starts_at <= now:
            _window_changed(locked)
        notices.reservation_decided(locked)
    return locked


def reservation_cancel(
    *,
    actor: User,
    reservation: Reservation,
    source_ip: str | None = None,
    now: datetime | None = None,
) -> Reservation:
    """Withdraw a booking (pending, or approved and not over): an open window closes now."""
    now = now or timezone.now()
    if reservation.requested_by_id != actor.pk and not is_team_lead(actor, reservation.team_id):
        raise PermissionDenied("Only whoever booked it, a lead of the team or an admin may.")
    with transaction.atomic():
        locked = Reservation.objects.select_for_update().get(pk=reservation.pk)
        if locked.state not in Reservation.HOLDING or locked.ends_at <= now:
            raise ValidationError({"state": "Only a pending or coming booking can be withdrawn."})
        was_open = locked.state == Reservation.State.APPROVED and locked.starts_at <= now
        locked.state = Reservation.State.CANCELLED
        locked.save(update_fields=["state"])
        audit_record(actor=actor, action="reservation.cancel", obj=locked, source_ip=source_ip)
        if was_open:
            _window_changed(locked)
    return locked


def reservation_boundaries_apply(*, now: datetime | None = None) -> tuple[int, int]:
    """Act once on each approved window that opened or closed since the last pass: audit it and
    refresh the team's cluster quota. The scheduler needs none of this: it reads the windows
    open at each cycle's time."""
    now = now or timezone.now()
    opened = closed = 0
    with transaction.atomic():
        approved = Reservation.objects.filter(state=Reservation.State.APPROVED)
        for r in approved.filter(started_noted=False, starts_at__lte=now, ends_at__gt=now):
            # Claimed by a conditional update: two workers never act on one window twice.
            if Reservation.objects.filter(pk=r.pk, started_noted=False).update(started_noted=True):
                audit_record(actor=None, action="reservation.start", obj=r)
                _window_changed(r)
                opened += 1
        for r in approved.filter(ended_noted=False, ends_at__lte=now):
            if Reservation.objects.filter(pk=r.pk, ended_noted=False).update(
                ended_noted=True, started_noted=True
            ):
                audit_record(actor=None, action="reservation.end", obj=r)
                _window_changed(r)
                closed += 1
    return opened, closed
