"""What orchestration keeps beside the cluster: the names it gave (home volumes), and what
outlives a workload's Kubernetes objects: the end of each pod's log and the workload's events,
archived before the objects are deleted (DESIGN.md, "Data and secrets")."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.workloads.models import Workload


class WorkloadLogArchive(models.Model):
    """The end of one pod's log: one replica of one attempt.

    A pod is archived once (keyed by its uid; a later pass updates the same row), and a new
    pod of the same replica — a retry, or the run after a preemption — is the next attempt,
    so no attempt's log overwrites another's.
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="log_archives")
    replica = models.PositiveIntegerField(help_text="Replica index (sweeps: the trial).")
    attempt = models.PositiveIntegerField(help_text="1 for the replica's first pod, then 2, …")
    pod_name = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64)
    container = models.CharField(max_length=63)
    text = models.TextField(blank=True, help_text="The end of the log, with timestamps.")
    bytes = models.PositiveIntegerField(default=0, help_text="Size of the kept text (UTF-8).")
    truncated = models.BooleanField(
        default=False, help_text="Earlier output was longer than the cap and was not kept."
    )
    note = models.CharField(
        max_length=500, blank=True, help_text="Why there is no log (the cluster's words)."
    )
    archived_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workload", "replica", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["workload", "pod_uid"], name="log_archive_pod_unique"),
            models.UniqueConstraint(
                fields=["workload", "replica", "attempt"], name="log_archive_attempt_unique"
            ),
        ]
        indexes = [models.Index(fields=["archived_at"], name="log_archive_age_idx")]

    def __str__(self) -> str:
        return f"workload #{self.workload_id} replica {self.replica} attempt {self.attempt}"


class WorkloadArchive(models.Model):
    """A workload's Kubernetes events, merged over every archiving pass, and how archiving
    went: when the cluster could not give the logs, since when, and the note left when the
    objects were deleted without them."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="archive")
    events = models.JSONField(
        default=list, blank=True, help_text="Kubernetes events (time, type, reason, …)."
    )
    note = models.CharField(max_length=500, blank=True)
    failing_since = models.DateTimeField(
        null=True, blank=True, help_text="Archiving has failed since then; the delete waits."
    )
    archived_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["archived_at"], name="workload_archive_age_idx")]

    def __str__(self) -> str:
        return f"archive of workload #{self.workload_id}"


class HomeVolume(models.Model):
    """A person's home volume (PersistentVolumeClaim) in a team's namespace.

    The claim's name is chosen once, keyed by the user's id (``home-u<id>``), stored here and
    never recomputed: volumes made before this table keep the name they had (see migration
    0002), and no two people ever share one, whatever their usernames.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="home_volumes"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="home_volumes")
    claim = models.CharField(max_length=63)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="home_volume_one_per_team"),
            models.UniqueConstraint(fields=["team", "claim"], name="home_volume_claim_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.claim} in {self.team.namespace}"


class LiveMetrics(models.Model):
    """The last metrics line a running trial printed, read from the end of its pod's log while
    it runs (``trial_metrics_pass``): what the trials table shows before the log is archived."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="live_metrics")
    line = models.CharField(max_length=500, blank=True, help_text="Empty: none printed yet.")
    pod_name = models.CharField(max_length=253, help_text="The pod whose log it was read from.")
    line_at = models.DateTimeField(
        null=True, blank=True, help_text="When the line was first read (its pod's time)."
    )
    read_at = models.DateTimeField(help_text="When the log was last read.")

    class Meta:
        indexes = [models.Index(fields=["read_at"], name="live_metrics_read_idx")]

    def __str__(self) -> str:
        return f"metrics of workload #{self.workload_id}"
