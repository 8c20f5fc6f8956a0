from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import GpuClass, Image
from apps.policies import core


class TeamPolicy(models.Model):
    """What a team may ask for, beyond its quota. Empty lists and empty numbers restrict
    nothing."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="policy")
    allowed_classes = models.ManyToManyField(
        GpuClass, blank=True, related_name="+", help_text="Empty: every class with a quota."
    )
    allowed_images = models.ManyToManyField(
        Image, blank=True, related_name="+", help_text="Empty: every offered image."
    )
    max_gpu_milli_per_workload = models.PositiveIntegerField(
        "maximum milli-GPU per workload", null=True, blank=True
    )
    max_runtime_notebook_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_runtime_training_seconds = models.PositiveIntegerField(null=True, blank=True)
    max_runtime_sweep_seconds = models.PositiveIntegerField(null=True, blank=True)
    idle_timeout_notebook_seconds = models.PositiveIntegerField(null=True, blank=True)
    idle_timeout_training_seconds = models.PositiveIntegerField(null=True, blank=True)
    idle_timeout_sweep_seconds = models.PositiveIntegerField(null=True, blank=True)
    exclusive_classes = models.ManyToManyField(
        GpuClass,
        blank=True,
        related_name="+",
        help_text="Classes on which the team does not share a GPU with other teams.",
    )
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name_plural = "team policies"

    def __str__(self) -> str:
        return f"policy of {self.team}"

    def spec(self) -> core.PolicySpec:
        classes = {c.name for c in self.allowed_classes.all()}
        images = {i.name for i in self.allowed_images.all()}
        return core.PolicySpec(
            team=self.team.name,
            allowed_classes=frozenset(classes) if classes else None,
            allowed_images=frozenset(images) if images else None,
            max_gpu_milli_per_workload=self.max_gpu_milli_per_workload,
            max_runtime_seconds={
                kind: value
                for kind in core.KINDS
                if (value := getattr(self, f"max_runtime_{kind}_seconds")) is not None
            },
            default_idle_timeout_seconds={
                kind: value
                for kind in core.KINDS
                if (value := getattr(self, f"idle_timeout_{kind}_seconds")) is not None
            },
            exclusive_classes=frozenset(c.name for c in self.exclusive_classes.all()),
        )
