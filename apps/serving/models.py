from __future__ import annotations

from django.db import models
from django.utils import timezone

from apps.workloads.models import Workload


class EndpointSample(models.Model):
    """One pass of the scaling loop over an endpoint: its replicas against its load, and what
    the loop decided. The endpoint page draws replicas over time from these."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    replicas = models.PositiveIntegerField(help_text="Replicas it held.")
    target = models.PositiveIntegerField(help_text="Replicas it was asked to run.")
    requests_per_second = models.FloatField(null=True, blank=True)
    latency_p95_seconds = models.FloatField(null=True, blank=True)
    gpu_utilisation = models.FloatField(null=True, blank=True, help_text="Percent, mean.")
    decision = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["workload", "at"], name="endpoint_sample_idx"),
            models.Index(fields=["at"], name="endpoint_sample_at_idx"),  # the purge
        ]

    def __str__(self) -> str:
        return f"#{self.workload_id} at {self.at:%H:%M:%S}: {self.replicas}/{self.target}"


class ScalerState(models.Model):
    """What the scaling loop remembers of an endpoint between passes (cool-downs, idleness)."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="+")
    last_change_at = models.FloatField(null=True, blank=True)
    idle_since = models.FloatField(null=True, blank=True)
    recent = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"scaler of #{self.workload_id}"
