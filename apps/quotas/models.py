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
