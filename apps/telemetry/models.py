"""What the portal keeps of GPU telemetry: accounting, idle streaks and notices, idle policies,
node health. Prometheus keeps the time series; these rows are what accounting needs."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import ClusterNode, GpuClass
from apps.workloads.models import Workload


class IdlePolicy(models.Model):
    """When a GPU counts as idle, and what happens then, for a team and/or a GPU class.

    The most specific policy wins: team + class, then team, then class, then the global one
    (neither set); without any row the TELEMETRY_IDLE_* settings apply.
    """

    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="idle_policies"
    )
    gpu_class = models.ForeignKey(
        GpuClass, null=True, blank=True, on_delete=models.CASCADE, related_name="idle_policies"
    )
    enabled = models.BooleanField(
        default=True, help_text="Off: idle time is still measured and shown, nothing is culled."
    )
    threshold_percent = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="A GPU below this utilisation (percent) is idle.",
    )
    warn_after = models.DurationField(
        default=timedelta(minutes=20), help_text="Notebooks: warn the owner after this idle time."
    )
    suspend_after = models.DurationField(
        default=timedelta(minutes=30),
        help_text="Notebooks: suspend (storage kept) after this idle time, once warned.",
    )
    flag_after = models.DurationField(
        default=timedelta(hours=1),
        help_text="Training jobs and sweeps: flag to the owner and leads after this idle time.",
    )

    class Meta:
        verbose_name_plural = "idle policies"
        ordering = ["team__name", "gpu_class__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "gpu_class"],
                name="idle_policy_unique",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        team = self.team.name if self.team else "every team"
        gpu = self.gpu_class.name if self.gpu_class else "every GPU class"
        return f"{team} / {gpu}"

    def clean(self) -> None:
        if self.warn_after and self.suspend_after and self.suspend_after < self.warn_after:
            raise ValidationError({"suspend_after": "Suspend only after the warning."})


class WorkloadUsage(models.Model):
    """A workload's running totals and its current idle streak."""

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, primary_key=True, related_name="usage"
    )
    allocated_gpu_seconds = models.FloatField(default=0.0)
    used_gpu_seconds = models.FloatField(default=0.0)
    measured_seconds = models.FloatField(
        default=0.0, help_text="Seconds for which the exporter reported this workload's GPUs."
    )
    last_utilisation = models.FloatField(null=True, blank=True, help_text="0–1, last cycle.")
    last_sample_at = models.DateTimeField(null=True, blank=True)
    pods = models.JSONField(
        default=list, blank=True, help_text="[namespace, pod] pairs seen in the last cycle."
    )
    idle_since = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    flagged_at = models.DateTimeField(null=True, blank=True)
    # Notebooks: when Jupyter last saw use (its API, kernels, terminals; now while a kernel is
    # busy), as read by the last activity pass; None until Jupyter answered once.
    jupyter_last_activity = models.DateTimeField(null=True, blank=True)
    jupyter_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["idle_since"], name="usage_idle_since_idx")]

    def __str__(self) -> str:
        return f"usage of {self.workload}"

    @property
    def allocated_gpu_hours(self) -> float:
        return self.allocated_gpu_seconds / 3600

    @property
    def used_gpu_hours(self) -> float:
        return self.used_gpu_seconds / 3600


class UsageDay(models.Model):
    """Allocated and used GPU time of one workload on one day (UTC), priced when accrued."""

    day = models.DateField()
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="usage_days")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.CASCADE, related_name="+")
    allocated_gpu_seconds = models.FloatField(default=0.0)
    used_gpu_seconds = models.FloatField(default=0.0)
    unmeasured_gpu_seconds = models.FloatField(
        default=0.0,
        db_default=0.0,
        help_text="Allocated GPU-seconds without a measurement: no data, neither used nor idle.",
    )
    cost = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal("0"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workload", "day"], name="usage_day_unique"),
        ]
        indexes = [
            models.Index(fields=["team", "day"], name="usage_day_team_idx"),
            models.Index(fields=["owner", "day"], name="usage_day_owner_idx"),
            models.Index(fields=["day"], name="usage_day_day_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.workload_id} on {self.day}"


class IdleNotice(models.Model):
    """Something the idle policy did: a warning, a suspension, a flag to owner and leads."""

    class Kind(models.TextChoices):
        WARNED = "warned", "Warned"
        SUSPENDED = "suspended", "Suspended"
        FLAGGED = "flagged", "Flagged to owner and leads"

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="idle_notices")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    message = models.CharField(max_length=500)
    utilisation = models.FloatField(help_text="0–1 when the notice was made.")
    idle_since = models.DateTimeField()
    allocated_gpus = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(
        null=True, blank=True, help_text="The GPU was used again, or the workload resumed or ended."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workload", "kind", "resolved_at"], name="idle_notice_open_idx"),
            models.Index(fields=["kind", "created_at"], name="idle_notice_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.workload}"

    def reclaimed_gpu_seconds(
        self, now: datetime | None = None, since: datetime | None = None
    ) -> float:
        """GPU time given back by a suspension: from suspending until resumed (or now).

        With ``since``, only the part of that time after ``since`` counts: a suspension
        begun last month and still in force gives this month the hours since it began.
        """
        if self.kind != self.Kind.SUSPENDED:
            return 0.0
        end = self.resolved_at or now or timezone.now()
        start = self.created_at if since is None else max(self.created_at, since)
        return max(0.0, (end - start).total_seconds()) * self.allocated_gpus


class IngestCursor(models.Model):
    """The single row that serialises ingestion passes and remembers how far they got."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    until = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.PositiveIntegerField(default=0)
    last_series = models.PositiveIntegerField(default=0)
    last_workloads = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"ingested until {self.until}"


class NodeHealthReport(models.Model):
    """A GPU node's inventory and health as its exporter reports it: the acceptance check."""

    class Verdict(models.TextChoices):
        OK = "ok", "OK"
        WARNING = "warning", "Warning"
        FAILED = "failed", "Failed"

    hostname = models.CharField(max_length=253, unique=True)
    cluster_node = models.ForeignKey(
        ClusterNode, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source = models.CharField(max_length=32, help_text="dcgm-exporter or the pynvml agent.")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    expected_gpu_count = models.PositiveSmallIntegerField(null=True, blank=True)
    models_seen = models.CharField("models", max_length=300, blank=True)
    driver_version = models.CharField(max_length=64, blank=True)
    memory_mib = models.PositiveIntegerField("memory per GPU (MiB)", default=0)
    max_temperature_c = models.FloatField(null=True, blank=True)
    ecc_single_bit = models.PositiveIntegerField("ECC corrected (SBE)", default=0)
    ecc_double_bit = models.PositiveIntegerField("ECC uncorrected (DBE)", default=0)
    xid_errors = models.JSONField(default=list, blank=True, help_text="Last XID per GPU, if any.")
    gpus = models.JSONField(default=list, blank=True)
    verdict = models.CharField(max_length=8, choices=Verdict.choices, default=Verdict.OK)
    problems = models.JSONField(default=list, blank=True)
    reported_as = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="What the exporter calls this node, if not its name.",
    )
    reported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return f"{self.hostname}: {self.verdict}"
