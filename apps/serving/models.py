from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.serving import keys
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


class EndpointKey(models.Model):
    """A key applications call one inference endpoint with. Only its digest is stored; the key
    is shown once, when created. Revoked keys stay listed (who made it, when it was last used)
    and open nothing."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="endpoint_keys")
    # The endpoint (an inference workload of the team), by its id.
    endpoint_id = models.PositiveIntegerField(db_index=True)
    name = models.CharField(max_length=keys.MAX_KEY_NAME_LENGTH)
    lookup = models.CharField(max_length=16, help_text="Shown to tell keys apart.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The table the keys were created in when they were credentials' (moved without a copy).
        db_table = "credentials_endpointkey"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({keys.ENDPOINT_KEY_PREFIX}_{self.lookup}_…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None
