from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from apps.catalog import core


class GpuClass(models.Model):
    """A kind of GPU offered to users, and how a fraction of it becomes Kubernetes resources."""

    class Sharing(models.TextChoices):
        WHOLE = core.SHARING_WHOLE, "Whole GPUs"
        TIMESLICE = core.SHARING_TIMESLICE, "Time-slicing (no memory isolation)"
        MIG = core.SHARING_MIG, "MIG partitions"
        HAMI = core.SHARING_HAMI, "HAMi virtual GPUs"

    name = models.CharField(max_length=64, unique=True, help_text="e.g. H100-80GB")
    product_label = models.CharField(
        max_length=128,
        help_text="Value of the node label nvidia.com/gpu.product, e.g. NVIDIA-H100-80GB-HBM3.",
    )
    memory_mib = models.PositiveIntegerField("memory (MiB)", validators=[MinValueValidator(1024)])
    sharing_mode = models.CharField(max_length=16, choices=Sharing.choices, default=Sharing.WHOLE)
    timeslice_replicas = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Time-slicing: replicas per GPU."
    )
    mig_profiles = models.JSONField(
        default=list, blank=True, help_text='MIG: profiles offered, e.g. ["1g.10gb", "3g.40gb"].'
    )
    hami_split_count = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="HAMi: virtual GPUs per physical GPU."
    )

    class Allocation(models.TextChoices):
        DEVICE_PLUGIN = core.ALLOCATION_DEVICE_PLUGIN, "Device plugin (extended resources)"
        DRA = core.ALLOCATION_DRA, "Dynamic Resource Allocation (ResourceClaims)"

    allocation_mode = models.CharField(
        max_length=16,
        choices=Allocation.choices,
        default=Allocation.DEVICE_PLUGIN,
        # Also the column's own default: rows written by code that predates the field (older
        # processes during a rolling upgrade, historical models in data migrations) get it.
        db_default=Allocation.DEVICE_PLUGIN,
        help_text="How pods get these GPUs: nvidia.com/* extended resources of the device "
        "plugin, or ResourceClaims on the devices NVIDIA's DRA driver publishes "
        "(gpu.nvidia.com). Switching keeps running work as it is; new work gets the new way.",
    )
    hourly_cost = models.DecimalField(
        "hourly cost per GPU",
        max_digits=10,
        decimal_places=4,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    capacity_gpus = models.PositiveIntegerField(
        "known capacity (GPUs)",
        default=0,
        help_text="Physical GPUs of this class across enabled clusters; 0 when unknown.",
    )
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "GPU class"
        verbose_name_plural = "GPU classes"

    def __str__(self) -> str:
        return self.name

    def spec(self) -> core.GpuClassSpec:
        """This class as plain data for the pure cores (scheduler, resource mapping, manifests)."""
        return core.gpu_class_spec(self)

    def clean(self) -> None:
        profiles = self.mig_profiles if isinstance(self.mig_profiles, list) else None
        if profiles is None or not all(isinstance(p, str) for p in profiles):
            raise ValidationError({"mig_profiles": "Give MIG profiles as a list of names."})
        errors = core.sharing_params_errors(
            mode=self.sharing_mode,
            memory_mib=self.memory_mib or 0,
            timeslice_replicas=self.timeslice_replicas,
            mig_profiles=profiles,
            hami_split_count=self.hami_split_count,
        )
        allocation = core.allocation_mode_error(
            allocation_mode=self.allocation_mode, sharing_mode=self.sharing_mode
        )
        if allocation:
            errors["allocation_mode"] = allocation
        if errors:
            raise ValidationError(errors)

    @property
    def capacity_milli(self) -> int:
        return self.capacity_gpus * 1000

    @property
    def shares_gpus(self) -> bool:
        return self.sharing_mode != core.SHARING_WHOLE


class Image(models.Model):
    """A curated container image users may pick."""

    class Kind(models.TextChoices):
        NOTEBOOK = "notebook", "Notebook"
        TRAINING = "training", "Training"
        ANY = "any", "Notebook or training"
        SERVING = "serving", "Model serving (inference endpoints)"

    name = models.CharField(max_length=100, unique=True)
    reference = models.CharField(
        max_length=255, help_text="Full image reference with tag or digest."
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ANY)
    description = models.TextField(blank=True)
    read_only_root = models.BooleanField(
        default=False, help_text="The image runs with a read-only root filesystem."
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        problem = core.image_reference_problem(self.reference or "")
        if problem:
            raise ValidationError({"reference": problem})


class Cluster(models.Model):
    """A Kubernetes cluster gpupaas schedules onto."""

    class Connection(models.TextChoices):
        IN_CLUSTER = "in_cluster", "In-cluster service account"
        KUBECONFIG = "kubeconfig", "Kubeconfig file"

    class Role(models.TextChoices):
        HUB = "hub", "Hub"
        SPOKE = "spoke", "Spoke"
        BURST = "burst", "Burst"

    name = models.SlugField(max_length=63, unique=True)
    connection = models.CharField(
        max_length=16, choices=Connection.choices, default=Connection.KUBECONFIG
    )
    kubeconfig_path = models.CharField(
        max_length=500,
        blank=True,
        help_text="Path of the kubeconfig file on the portal and worker hosts (never its content).",
    )
    kubeconfig_context = models.CharField(max_length=200, blank=True)
    role = models.CharField(
        max_length=8,
        choices=Role.choices,
        default=Role.HUB,
        help_text="Hub and spoke clusters serve every request; a burst cluster only work that "
        "could not start on them within its class's burst wait, of teams that may burst.",
    )
    gpu_hourly_cost = models.DecimalField(
        "GPU-hour price",
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        help_text="Price of one GPU-hour here, if not the class's (a burst cloud's price).",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.connection == self.Connection.KUBECONFIG and not self.kubeconfig_path:
            raise ValidationError(
                {"kubeconfig_path": "A kubeconfig connection needs the path of the file."}
            )
        if self.connection == self.Connection.IN_CLUSTER and (
            self.kubeconfig_path or self.kubeconfig_context
        ):
            raise ValidationError(
                {"kubeconfig_path": "An in-cluster connection uses no kubeconfig; leave it empty."}
            )


class ClusterNode(models.Model):
    """A GPU node of a cluster, as last reported by Kubernetes (synced by orchestration).

    The scheduler reads this inventory to place workloads; it is never edited by hand.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    gpu_class = models.ForeignKey(
        GpuClass, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes"
    )
    gpu_count = models.PositiveSmallIntegerField(default=0)
    gpu_uuids = models.JSONField(default=list, blank=True)
    mig_layout = models.JSONField(
        default=list,
        blank=True,
        help_text='MIG: the instances every GPU is partitioned into, e.g. ["1g.10gb", "3g.40gb"].',
    )
    cpu_milli = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    allocatable = models.JSONField(default=dict, blank=True)
    images = models.JSONField(
        default=list,
        blank=True,
        db_default=[],
        help_text="The image names the node reports it holds (status.images); empty: it reports "
        "none, so which images it has is unknown.",
    )
    schedulable = models.BooleanField(default=True)
    ready = models.BooleanField(default=True)
    # GPUs and MIG devices the node publishes through DRA (ResourceSlices of NVIDIA's driver),
    # as the last inventory pass read them; a class allocated through DRA needs some.
    dra_devices = models.PositiveIntegerField(default=0, db_default=0, editable=False)
    last_seen_at = models.DateTimeField(default=timezone.now)
    # The node's acceptance check as its GPU exporter last reported it ("" when never).
    health_verdict = models.CharField(max_length=8, blank=True, default="", db_default="")
    health_problems = models.JSONField(default=list, blank=True, db_default=[])
    # GPUs of the node that failed their health check (``apps.telemetry.core.GpuFault`` as
    # dicts, with ``index`` the GPU's position in ``gpu_uuids``): they take no new work, and
    # one that fell off the bus (NoExecute) has its work moved off. The rest of the node goes on.
    gpu_faults = models.JSONField(default=list, blank=True, db_default=[], editable=False)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="cluster_node_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"


class NodeMaintenance(models.Model):
    """A window during which a node takes no new work; with ``drain``, what runs there is given
    its class's notice and goes back to the queue when the window opens."""

    node = models.ForeignKey(
        ClusterNode, on_delete=models.CASCADE, related_name="maintenance_windows"
    )
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=300)
    drain = models.BooleanField(
        default=True,
        help_text="Move running workloads off the node when the window opens (with notice).",
    )
    created_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["starts_at", "pk"]
        indexes = [models.Index(fields=["ends_at"], name="node_maintenance_end_idx")]

    def __str__(self) -> str:
        return f"{self.node} {self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%Y-%m-%d %H:%M}"

    def clean(self) -> None:
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "A maintenance window ends after it starts."})
        if self.ends_at and self.ends_at - (self.starts_at or self.ends_at) > MAINTENANCE_LONGEST:
            raise ValidationError({"ends_at": "A maintenance window lasts at most 90 days."})

    def open_at(self, moment: datetime) -> bool:
        return self.starts_at <= moment < self.ends_at


MAINTENANCE_LONGEST = timedelta(days=90)
