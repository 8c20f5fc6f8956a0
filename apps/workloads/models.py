from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import Cluster, GpuClass, Image
from apps.workloads import core, rules


def default_cpu_milli() -> int:
    """CPU (milli-cores) one replica asks for besides its GPUs, at submit (WORKLOAD_CPU_MILLI)."""
    return int(settings.WORKLOAD_CPU_MILLI)


def default_memory_mib() -> int:
    """Memory (MiB) one replica asks for besides its GPUs, at submit (WORKLOAD_MEMORY_MIB)."""
    return int(settings.WORKLOAD_MEMORY_MIB)


class WorkloadQuerySet(models.QuerySet["Workload"]):
    def units(self) -> WorkloadQuerySet:
        """What holds or waits for GPUs: everything but sweeps themselves (their trials do)."""
        return self.exclude(kind=core.KIND_SWEEP, sweep__isnull=True)

    def listed(self) -> WorkloadQuerySet:
        """What lists show: everything but trials (the sweep's page shows them)."""
        return self.filter(sweep__isnull=True)


class Workload(models.Model):
    """What a user asked for, what the scheduler admitted, and what Kubernetes runs."""

    class Kind(models.TextChoices):
        NOTEBOOK = core.KIND_NOTEBOOK, "Notebook"
        TRAINING = core.KIND_TRAINING, "Training job"
        SWEEP = core.KIND_SWEEP, "Batch sweep"
        INFERENCE = core.KIND_INFERENCE, "Inference endpoint"

    class State(models.TextChoices):
        PENDING = core.PENDING, "Pending"
        QUEUED = core.QUEUED, "Queued"
        ADMITTED = core.ADMITTED, "Admitted"
        STARTING = core.STARTING, "Starting"
        RUNNING = core.RUNNING, "Running"
        SUCCEEDED = core.SUCCEEDED, "Succeeded"
        FAILED = core.FAILED, "Failed"
        CANCELLED = core.CANCELLED, "Cancelled"
        PREEMPTED = core.PREEMPTED, "Preempted"
        SUSPENDED = core.SUSPENDED, "Suspended"
        EXPIRED = core.EXPIRED, "Expired"

    class Priority(models.TextChoices):
        PRODUCTION = core.PRIORITY_PRODUCTION, "Production"
        TRAINING = core.PRIORITY_TRAINING, "Training"
        DEVELOPMENT = core.PRIORITY_DEVELOPMENT, "Development"
        BATCH = core.PRIORITY_BATCH, "Batch"

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workloads"
    )
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="workloads")
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="workloads")
    gpu_milli = models.PositiveIntegerField(
        "GPU per replica (milli-GPU)", validators=[MinValueValidator(1)]
    )
    replicas = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    # What the cluster grants one replica of ``gpu_milli`` on the class (whole time slices, the
    # MIG profile, whole GPUs), fixed at submit: quota, capacity, fair share and chargeback
    # count this, never less (rules.charge_of).
    charged_milli = models.PositiveIntegerField(
        "charged per replica (milli-GPU)", validators=[MinValueValidator(1)]
    )
    priority_class = models.CharField(max_length=16, choices=Priority.choices)
    image = models.ForeignKey(Image, on_delete=models.PROTECT, related_name="workloads")
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    secrets = models.JSONField(
        default=list,
        blank=True,
        help_text="References to team or personal secrets (names, never values).",
    )
    datasets = models.JSONField(
        default=list,
        blank=True,
        help_text="The team's datasets the workload reads, as resolved at submit.",
    )
    cpu_milli = models.PositiveIntegerField(default=default_cpu_milli)
    memory_mib = models.PositiveIntegerField(default=default_memory_mib)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    idle_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    retries = models.PositiveSmallIntegerField(default=0)
    requeue_on_preemption = models.BooleanField(default=True)
    params = models.JSONField(default=dict, blank=True, help_text="Kind-specific settings.")

    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="workloads"
    )
    placement = models.JSONField(
        default=dict, blank=True, help_text="Admitted placement: node → GPU indices/instances."
    )
    k8s_objects = models.JSONField(
        "Kubernetes objects",
        default=list,
        blank=True,
        help_text="The objects created for this workload, as stored names (kind, namespace, name).",
    )
    last_reason = models.CharField(max_length=500, blank=True)
    # Deleted by its owner: gone from every list and page, kept for accounting and audit.
    deleted_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Written by the scheduling cycle (the scheduling app's services).
    borrowed = models.BooleanField(
        default=False,
        help_text="Runs above the team's guarantee on idle capacity; reclaimable.",
    )
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    estimated_start_at = models.DateTimeField(null=True, blank=True)
    scheduling_advice = models.JSONField(default=list, blank=True)
    preempted_at = models.DateTimeField(null=True, blank=True)
    # The last checkpoint the running program reported on its log (docs/checkpoints.md), kept
    # by orchestration's metrics pass: preemption picks the victims that lose the least work.
    checkpoint_at = models.DateTimeField(null=True, blank=True, editable=False)
    checkpoint_step = models.BigIntegerField(null=True, blank=True, editable=False)
    # A sweep's trial: its own schedulable unit (admitted, charged, preempted and retried on
    # its own), one point of the sweep's grid. The sweep itself (kind sweep, no ``sweep``)
    # holds no GPUs: its state follows its trials' (services.sweep_state_refresh).
    sweep = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="trials"
    )
    trial_index = models.PositiveIntegerField(null=True, blank=True)
    # The exit code of the program's last run, as the cluster reported it (jobs and trials).
    exit_code = models.IntegerField(null=True, blank=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["state", "-created_at"], name="workload_state_idx"),
            models.Index(fields=["team", "state"], name="workload_team_state_idx"),
            models.Index(fields=["owner", "-created_at"], name="workload_owner_idx"),
            models.Index(fields=["kind"], name="workload_kind_idx"),
            models.Index(fields=["priority_class"], name="workload_priority_idx"),
            models.Index(fields=["-created_at"], name="workload_created_idx"),
            # The API's list: a page of a team's listed workloads (live, not a sweep's trial),
            # newest first, read from the index alone (the count and the page's ids need no
            # table rows). The condition is the list's own: with ``deleted_at`` alone, the
            # lists' ``sweep_id IS NULL`` was checked on every table row (12,700 rows: the
            # count a sequential scan of 6 ms, a deep page 5 ms, instead of about 1 ms each).
            models.Index(
                fields=["team", "-created_at", "-id"],
                condition=models.Q(deleted_at__isnull=True, sweep__isnull=True),
                name="workload_listed_team_idx",
            ),
            models.Index(
                fields=["-created_at", "-id"],
                condition=models.Q(deleted_at__isnull=True, sweep__isnull=True),
                name="workload_listed_idx",
            ),
            # The workloads list sorted by name, a page of a team's at a time.
            models.Index(
                fields=["team", "name", "id"],
                condition=models.Q(deleted_at__isnull=True, sweep__isnull=True),
                name="workload_listed_team_name_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(gpu_milli__gte=1), name="workload_milli_pos"),
            models.CheckConstraint(
                condition=models.Q(replicas__gte=1), name="workload_replicas_pos"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    def clean(self) -> None:
        if self.gpu_milli is None or self.replicas is None:
            return
        errors = rules.amount_problems(self.kind, self.gpu_milli, self.replicas)
        if errors:
            raise ValidationError(errors)

    @property
    def total_milli(self) -> int:
        """What the workload is charged: ``replicas × charged_milli``."""
        return self.charged_milli * self.replicas

    @property
    def requested_milli(self) -> int:
        """What was asked for: ``replicas × gpu_milli``."""
        return self.gpu_milli * self.replicas

    @property
    def is_sweep(self) -> bool:
        """A sweep itself (its trials are the units that run)."""
        return self.kind == core.KIND_SWEEP and self.sweep_id is None

    @property
    def is_terminal(self) -> bool:
        return self.state in core.TERMINAL_STATES


class WorkloadEvent(models.Model):
    """One state change of a workload, with the reason shown to the user."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.CharField(max_length=500)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workload", "created_at"], name="wl_event_idx")]

    def __str__(self) -> str:
        return f"{self.from_state or '∅'} → {self.to_state}: {self.reason}"


class IdempotencyKey(models.Model):
    """An API client's Idempotency-Key for a workload submission: a retried POST with the same
    key returns the workload the first one created instead of submitting twice."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the request body the key was first used with."
    )
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key} → workload #{self.workload_id}"


class RequestTemplate(models.Model):
    """A named request a user saved to start from later; shared with a team when it has one."""

    name = models.CharField(max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="request_templates"
    )
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="request_templates",
        help_text="Shared with this team's members; empty: only its owner sees it.",
    )
    kind = models.CharField(max_length=16, choices=Workload.Kind.choices)
    values = models.JSONField(
        default=dict, blank=True, help_text="The request form's fields as the user typed them."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "kind", "name"], name="request_template_unique_name"
            ),
        ]
        indexes = [models.Index(fields=["team", "kind"], name="request_template_team_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
