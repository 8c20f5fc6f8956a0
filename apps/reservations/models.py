from __future__ import annotations

from django.db import models

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas.core import format_milli
from apps.reservations import core


class Reservation(models.Model):
    """A team's booking of ``count × size`` milli-GPU of a class for ``[starts_at, ends_at)``.

    Pending and approved bookings hold their capacity on the calendar; only approved ones are
    held for the team by the scheduler during the window."""

    class State(models.TextChoices):
        PENDING = "pending", "waiting for an admin"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        CANCELLED = "cancelled", "cancelled"

    HOLDING = (State.PENDING, State.APPROVED)

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="reservations")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="reservations")
    requested_by = models.ForeignKey(
        "accounts.User", on_delete=models.PROTECT, related_name="reservations"
    )
    size_milli = models.PositiveIntegerField("size of one unit (milli-GPU)", default=1000)
    count = models.PositiveIntegerField(default=1)
    total_milli = models.PositiveIntegerField("total (milli-GPU)")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    note = models.CharField(max_length=500, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        "accounts.User",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="reservation_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)
    started_noted = models.BooleanField(default=False)
    ended_noted = models.BooleanField(default=False)

    class Meta:
        ordering = ["starts_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="reservation_ends_after_start",
            ),
            models.CheckConstraint(
                condition=models.Q(total_milli=models.F("size_milli") * models.F("count")),
                name="reservation_total_is_size_times_count",
            ),
        ]
        indexes = [models.Index(fields=["gpu_class", "ends_at"], name="reservation_class_end_idx")]

    def __str__(self) -> str:
        return (
            f"{self.team} books {self.amount_label} of {self.gpu_class} "
            f"{self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M} ({self.state})"
        )

    @property
    def amount_label(self) -> str:
        if self.size_milli == 1000:
            return f"{self.count} GPU"
        return f"{self.count} × {format_milli(self.size_milli)} GPU"

    def booking(self) -> core.Booking:
        return core.Booking(
            id=self.pk,
            team=self.team.name,
            gpu_class=self.gpu_class.name,
            milli=self.total_milli,
            start=self.starts_at,
            end=self.ends_at,
        )

    def commitment(self) -> core.Commitment:
        return core.Commitment(self.total_milli, self.starts_at, self.ends_at)
