"""Catalog writes: GPU classes, images and clusters, whichever screen asks for them (the Django
admin included). Each validates the row, saves it, and records what changed in the audit trail
in the same transaction."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from apps.accounts.models import User
from apps.accounts.roles import Act, refusal
from apps.accounts.selectors import platform_may
from apps.audit.services import audit_record, audited_delete, audited_save
from apps.catalog.models import Cluster, GpuClass, Image, NodeMaintenance
from apps.common import taskqueue

# The columns that decide how a class's GPUs become Kubernetes resources, and so every team's
# ResourceQuota for the class.
GPU_CLASS_RESOURCE_FIELDS = frozenset(
    {"sharing_mode", "timeslice_replicas", "mig_profiles", "hami_split_count", "memory_mib"}
)
# The columns that decide how gpupaas reaches a cluster.
CLUSTER_CONNECTION_FIELDS = frozenset(
    {"connection", "kubeconfig_path", "kubeconfig_context", "enabled"}
)


def _may(actor: User | None, act: Act) -> None:
    """Refuse a person whose platform roles may not ``act`` (None: the platform itself)."""
    if actor is not None and not platform_may(actor, act):
        raise PermissionDenied(refusal(act))


def _setup_enabled_clusters() -> None:
    for cluster_id in Cluster.objects.filter(enabled=True).values_list("pk", flat=True):
        taskqueue.CLUSTER_SETUP.on_commit(cluster_id)


# --- GPU classes ------------------------------------------------------------------------------


def gpu_class_save(
    *, actor: User | None, gpu_class: GpuClass, source_ip: str | None = None
) -> GpuClass:
    """Create or change a GPU class from its edited row.

    When the class's sharing parameters change, the Kubernetes resources its quotas are
    written in change too: every team's namespace is applied again on every enabled cluster.
    The hourly cost is billing's to change, the rest the capacity side's.
    """
    if gpu_class.pk is None:
        _may(actor, Act.MANAGE_CAPACITY)
    else:
        stored = GpuClass.objects.filter(pk=gpu_class.pk).values().first()
        changed = {k for k, v in dict(stored or {}).items() if getattr(gpu_class, k, v) != v}
        _may(actor, Act.MANAGE_BILLING if changed <= {"hourly_cost"} else Act.MANAGE_CAPACITY)
    with transaction.atomic():
        gpu_class, created, changes = audited_save(
            actor=actor, obj=gpu_class, action="gpuclass", source_ip=source_ip
        )
        if not created and GPU_CLASS_RESOURCE_FIELDS.intersection(changes):
            _setup_enabled_clusters()
    return gpu_class


def gpu_class_set_enabled(
    *, actor: User | None, gpu_class: GpuClass, enabled: bool, source_ip: str | None = None
) -> bool:
    """Offer a class to users, or stop offering it (running work is kept). Returns whether
    anything changed."""
    _may(actor, Act.MANAGE_CAPACITY)
    with transaction.atomic():
        # Conditional update: of two admins flipping the same class, one records the change.
        changed = GpuClass.objects.filter(pk=gpu_class.pk, enabled=not enabled).update(
            enabled=enabled
        )
        gpu_class.enabled = enabled
        if changed:
            audit_record(
                actor=actor,
                action="gpuclass.enable" if enabled else "gpuclass.disable",
                obj=gpu_class,
                source_ip=source_ip,
            )
    return bool(changed)


def gpu_class_delete(
    *, actor: User | None, gpu_class: GpuClass, source_ip: str | None = None
) -> None:
    """Delete a class no quota or workload refers to (the database protects those)."""
    _may(actor, Act.MANAGE_CAPACITY)
    audited_delete(actor=actor, obj=gpu_class, action="gpuclass", source_ip=source_ip)


# --- images -----------------------------------------------------------------------------------


def image_save(*, actor: User | None, image: Image, source_ip: str | None = None) -> Image:
    return audited_save(actor=actor, obj=image, action="image", source_ip=source_ip)[0]


def image_delete(*, actor: User | None, image: Image, source_ip: str | None = None) -> None:
    audited_delete(actor=actor, obj=image, action="image", source_ip=source_ip)


# --- clusters ---------------------------------------------------------------------------------


def cluster_save(*, actor: User | None, cluster: Cluster, source_ip: str | None = None) -> Cluster:
    """Register or change a cluster. A new, re-enabled or reconnected cluster gets every team's
    namespace, then its node inventory."""
    _may(actor, Act.MANAGE_CAPACITY)
    with transaction.atomic():
        cluster, created, changes = audited_save(
            actor=actor, obj=cluster, action="cluster", source_ip=source_ip
        )
        if cluster.enabled and (created or CLUSTER_CONNECTION_FIELDS.intersection(changes)):
            taskqueue.CLUSTER_SETUP.on_commit(cluster.pk)
    return cluster


def cluster_delete(*, actor: User | None, cluster: Cluster, source_ip: str | None = None) -> None:
    """Forget a cluster: its node inventory goes with it; what runs there is left alone."""
    _may(actor, Act.MANAGE_CAPACITY)
    audited_delete(actor=actor, obj=cluster, action="cluster", source_ip=source_ip)


# --- node maintenance -------------------------------------------------------------------------


def node_maintenance_save(
    *, actor: User | None, window: NodeMaintenance, source_ip: str | None = None
) -> NodeMaintenance:
    """Schedule or change a node's maintenance window: from its start the node takes no new
    work and, with ``drain``, what runs there is moved off with its class's notice (the
    scheduler's drain pass)."""
    _may(actor, Act.MANAGE_CAPACITY)
    if window.pk is None and actor is not None and window.created_by_id is None:
        window.created_by = actor
    return audited_save(actor=actor, obj=window, action="node_maintenance", source_ip=source_ip)[0]


def node_maintenance_delete(
    *, actor: User | None, window: NodeMaintenance, source_ip: str | None = None
) -> None:
    """Cancel a maintenance window: the node takes work again (if nothing else blocks it)."""
    _may(actor, Act.MANAGE_CAPACITY)
    audited_delete(actor=actor, obj=window, action="node_maintenance", source_ip=source_ip)
