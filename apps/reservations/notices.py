"""What whoever booked is told when a platform admin decides a booking that waited."""

from __future__ import annotations

from datetime import UTC

from django.urls import reverse

from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.reservations.models import Reservation


def reservation_decided(reservation: Reservation) -> int:
    verdict = "approved" if reservation.state == Reservation.State.APPROVED else "rejected"
    what = f"{reservation.amount_label} of {reservation.gpu_class.name}"
    start = reservation.starts_at.astimezone(UTC)
    end = reservation.ends_at.astimezone(UTC)
    body = (
        f"Your booking of {what} for {reservation.team.name}, {start:%Y-%m-%d %H:%M} – "
        f"{end:%Y-%m-%d %H:%M} UTC, was {verdict}"
        + (f" by {reservation.decided_by.get_username()}." if reservation.decided_by else ".")
    )
    if reservation.decision_comment:
        body += f"\n\nComment: {reservation.decision_comment}"
    if verdict == "approved":
        body += "\n\nDuring the window the capacity is held for the team."
    return notify(
        event=NoticeEvent.RESERVATION_DECIDED,
        users=[reservation.requested_by],
        title=f"Reservation {verdict}: {what}",
        body=body,
        key=f"reservation-{reservation.pk}-decided",
        link=reverse("reservations") + f"#reservation-{reservation.pk}",
        team=reservation.team,
    )
