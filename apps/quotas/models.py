from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas import core


class TeamQuota(models.Model):
    """A team's share of one GPU class, in milli-GPU (1000 = one GPU).

    ``guaranteed`` is never taken away; above it, up to ``limit``, the team borrows idle
    capacity that its owners may reclaim.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="quotas")
    guaranteed_milli = models.PositiveIntegerField("guaranteed (milli-GPU)", default=0)
    limit_milli = models.PositiveIntegerField("limit (milli-GPU)", default=0)
    per_user_cap_milli = models.PositiveIntegerField(
        "per-user cap (milli-GPU)", null=True, blank=True
    )

    class Meta:
        ordering = ["team__name", "gpu_class__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_class"], name="team_quota_unique"),
            models.CheckConstraint(
                condition=models.Q(limit_milli__gte=models.F("guaranteed_milli")),
                name="team_quota_limit_gte_guaranteed",
            ),
            models.CheckConstraint(
                condition=models.Q(per_user_cap_milli__isnull=True)
                | models.Q(per_user_cap_milli__lte=models.F("limit_milli")),
                name="team_quota_user_cap_lte_limit",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.team} × {self.gpu_class}: {core.format_milli(self.guaranteed_milli)}"
            f"–{core.format_milli(self.limit_milli)} GPU"
        )

    def clean(self) -> None:
        if self.guaranteed_milli is None or self.limit_milli is None:
            return
        errors = core.quota_errors(
            guaranteed_milli=self.guaranteed_milli,
            limit_milli=self.limit_milli,
            per_user_cap_milli=self.per_user_cap_milli,
        )
        if errors:
            raise ValidationError(errors)


class QuotaRequest(models.Model):
    """A member's or lead's ask for more of a class for a period, and its decision."""

    class Kind(models.TextChoices):
        TEAM = core.KIND_TEAM, "more for the team (admins decide)"
        USER = core.KIND_USER, "a higher per-user cap for me (leads decide)"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"
        CANCELLED = "cancelled", "cancelled"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="quota_requests")
    requested_by = models.ForeignKey(
        "accounts.User", on_delete=models.PROTECT, related_name="quota_requests"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.TEAM)
    amount_milli = models.PositiveIntegerField("amount (milli-GPU)")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    justification = models.TextField(max_length=core.JUSTIFICATION_MAX)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    decided_by = models.ForeignKey(
        "accounts.User",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="quota_decisions",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")),
                name="quota_request_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.team} asks {core.format_milli(self.amount_milli)} GPU {self.gpu_class} "
            f"({self.kind}, {self.state})"
        )


class QuotaGrant(models.Model):
    """What an approved request adds, from ``starts_at`` until ``ends_at`` (then nothing).

    ``user`` set: that member's per-user cap grows; else the team's guarantee and limit.
    ``started_noted``/``ended_noted`` record that the start and the end have been acted on
    (cluster quota refreshed, audited): the grant itself takes effect by its times alone."""

    request = models.OneToOneField(QuotaRequest, on_delete=models.CASCADE, related_name="grant")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_grants")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="quota_grants")
    user = models.ForeignKey(
        "accounts.User",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="quota_grants",
    )
    amount_milli = models.PositiveIntegerField("amount (milli-GPU)")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    started_noted = models.BooleanField(default=False)
    ended_noted = models.BooleanField(default=False)

    class Meta:
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["ends_at"], name="quota_grant_ends_idx")]

    def __str__(self) -> str:
        who = self.user.get_username() if self.user_id and self.user else str(self.team)
        return f"+{core.format_milli(self.amount_milli)} GPU {self.gpu_class} for {who}"

    def spec(self) -> core.Grant:
        return core.Grant(
            team=self.team.name,
            gpu_class=self.gpu_class.name,
            amount_milli=self.amount_milli,
            start=self.starts_at,
            end=self.ends_at,
            user=self.user.get_username() if self.user_id and self.user else None,
        )
