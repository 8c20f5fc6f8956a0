"""Converge Kubernetes to the database, and the database to what Kubernetes reports.

Idempotent by construction: object names come from the workload id, creating twice is
harmless (409 on an object with our labels), and names we created are stored on the
workload, so a worker killed at any line leaves nothing orphaned after the next pass.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Sum
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.resources import ResourceMappingError
from apps.common import taskqueue
from apps.orchestration import archive, reads
from apps.orchestration import manifests as m
from apps.orchestration import status as st
from apps.orchestration.clusters import kube_for
from apps.orchestration.errors import (
    ClusterError,
    ClusterObjectNotFound,
    ClusterRefused,
    ClusterUnreachable,
)
from apps.orchestration.kube import (
    IMMUTABLE_KINDS,
    OWNED_LIMIT_KINDS,
    Applied,
    ForeignObjectError,
    Kube,
    has_stale_limits,
    is_subset,
)
from apps.orchestration.models import HomeVolume, WorkloadArchive, WorkloadLogArchive
from apps.orchestration.selectors import (
    GONE_STATES,
    LIVE_STATES,
    cluster_of,
    enabled_clusters,
    team_spec,
    workload_spec,
)
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import endpoint_rollout_observed, workload_transition

log = logging.getLogger(__name__)

UNREACHABLE_REASON = "cluster unreachable, retrying"

# apiVersion and kind of every object a workload may own, for deletion and orphan sweeps.
WORKLOAD_KINDS = (
    ("batch/v1", "Job"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "Secret"),
)
API_VERSIONS = {kind: version for version, kind in WORKLOAD_KINDS}
# What a workload of each kind may own (manifests.workload_manifests), swept by label when its
# objects are deleted; a kind not named here may own any of WORKLOAD_KINDS.
OWNED_KINDS = {
    wl.KIND_TRAINING: {"Job", "Service", "NetworkPolicy"},
    wl.KIND_SWEEP: {"Job"},
}


# --- teams --------------------------------------------------------------------------------


def team_namespace_ensure(*, team: Team, clusters: Iterable[Cluster] | None = None) -> list[str]:
    """Namespace, quota, limits, network policies, service account and priority classes for a
    team on every enabled cluster. Returns the clusters it was applied to."""
    done = []
    manifests = [*m.priority_class_manifests(), *m.team_manifests(team_spec(team))]
    for cluster in clusters if clusters is not None else enabled_clusters():
        kube = kube_for(cluster)
        for manifest in manifests:
            applied = kube.apply(manifest)
            if applied.kind == "RoleBinding" and applied.created:
                # A least-privileged portal may write in the namespace once the API server's
                # authorizer has seen the new binding (usually within a second).
                kube.wait_until_allowed("create", "serviceaccounts", namespace=applied.namespace)
        done.append(cluster.name)
    return done


@dataclass
class DriftResult:
    checked: int = 0
    repaired: list[Applied] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # objects left as they are, and why


def _without_empty(value: Any) -> Any:
    """``value`` without the false and empty fields the API server leaves out when it stores
    an object (``globalDefault: false``, ``[]``), which are no drift."""
    if isinstance(value, Mapping):
        return {
            k: _without_empty(v)
            for k, v in value.items()
            if not (v is False or v is None or v == "" or v == [] or v == {})
        }
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def _drifted(desired: m.Manifest, current: Mapping[str, Any] | None) -> bool:
    if current is None:
        return True
    kind = desired["kind"]
    if kind in IMMUTABLE_KINDS:
        return False
    stale = kind in OWNED_LIMIT_KINDS and has_stale_limits(desired, current)
    return stale or not is_subset(_without_empty(desired), current)


def drift_repair_pass(*, cluster: Cluster) -> DriftResult:
    """Restore what gpupaas set up for the teams on one cluster when it was changed or deleted
    by hand: namespaces, service accounts, ResourceQuotas, LimitRanges, NetworkPolicies and the
    PriorityClasses. One list call per kind finds the drift; only drifted objects are written
    (created again, patched, or replaced whole for quotas). An object that is not ours, or
    that the API server refuses, is reported and left alone; the other objects are still
    repaired."""
    kube = kube_for(cluster)
    desired = list(m.priority_class_manifests())
    for team in Team.objects.order_by("pk"):
        desired += m.team_manifests(team_spec(team))
    current: dict[tuple[str, str, str], dict[str, Any]] = {}
    for api_version, kind in dict.fromkeys((d["apiVersion"], d["kind"]) for d in desired):
        for obj in kube.list_owned(api_version, kind):
            meta = obj.get("metadata") or {}
            current[(kind, str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    result = DriftResult(checked=len(desired))
    for manifest in desired:
        meta = manifest["metadata"]
        key = (manifest["kind"], str(meta.get("namespace") or ""), str(meta["name"]))
        if not _drifted(manifest, current.get(key)):
            continue
        what = f"{key[0]} {key[1] + '/' if key[1] else ''}{key[2]}"
        try:
            result.repaired.append(kube.apply(manifest))
        except (ForeignObjectError, ClusterRefused) as exc:
            result.failed.append(f"{what}: {exc}")
            continue
        log.warning("cluster %s: %s had drifted from what gpupaas set; restored", cluster, what)
    return result


# --- inventory ----------------------------------------------------------------------------


def _sharing_mode(labels: Mapping[str, str], allocatable: Mapping[str, Any]) -> str:
    if any(k.startswith("nvidia.com/mig-") for k in allocatable):
        return "mig"
    if "nvidia.com/gpumem" in allocatable:
        return "hami"
    if (
        "nvidia.com/gpu.shared" in allocatable
        or labels.get("nvidia.com/gpu.sharing-strategy") == "time-slicing"
    ):
        return "timeslice"
    return "whole"


def _mig_layout(allocatable: Mapping[str, Any], gpu_count: int) -> list[str]:
    layout: list[str] = []
    for resource in sorted(allocatable):
        if resource.startswith("nvidia.com/mig-") and gpu_count:
            per_gpu = int(str(allocatable[resource])) // gpu_count
            layout.extend([resource.removeprefix("nvidia.com/mig-")] * per_gpu)
    return layout


def _gpu_uuids(annotations: Mapping[str, str]) -> list[str]:
    """GPU UUIDs a node advertises (a JSON list, or a comma-separated list)."""
    raw = str(annotations.get("kubesim.io/gpu-uuids") or "").strip()
    if raw.startswith("["):
        try:
            return [str(u) for u in json.loads(raw)]
        except ValueError:
            return []
    return [u.strip() for u in raw.split(",") if u.strip()]


def _quantity_milli(value: Any) -> int:
    text = str(value or "0")
    if text.endswith("m"):
        return int(text[:-1])
    return int(float(text) * 1000)


def _quantity_mib(value: Any) -> int:
    text = str(value or "0")
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2, "Pi": 1024**3}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(int(text) / (1024 * 1024))


def cluster_inventory_sync(*, cluster: Cluster) -> int:
    """Mirror the cluster's GPU nodes into ClusterNode, and update each class's capacity."""
    return cluster_inventory_store(cluster=cluster, nodes=reads.gpu_nodes(cluster))


def cluster_inventory_store(*, cluster: Cluster, nodes: Iterable[dict[str, Any]]) -> int:
    """The inventory from nodes already read (a list, or a watch's copy of the GPU nodes)."""
    classes = {(c.product_label, c.sharing_mode): c for c in GpuClass.objects.all()}
    seen = []
    with transaction.atomic():
        for node in nodes:
            meta, status = node["metadata"], node.get("status") or {}
            labels = meta.get("labels") or {}
            allocatable = status.get("allocatable") or {}
            mode = _sharing_mode(labels, allocatable)
            gpu_count = int(labels.get("nvidia.com/gpu.count") or 0)
            annotations = meta.get("annotations") or {}
            uuids = _gpu_uuids(annotations)
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            ClusterNode.objects.update_or_create(
                cluster=cluster,
                name=meta["name"],
                defaults={
                    "gpu_class": classes.get((labels.get("nvidia.com/gpu.product", ""), mode)),
                    "gpu_count": gpu_count,
                    "gpu_uuids": uuids,
                    "mig_layout": _mig_layout(allocatable, gpu_count) if mode == "mig" else [],
                    "cpu_milli": _quantity_milli(allocatable.get("cpu")),
                    "memory_mib": _quantity_mib(allocatable.get("memory")),
                    "labels": labels,
                    "allocatable": {k: str(v) for k, v in allocatable.items()},
                    "schedulable": not (node.get("spec") or {}).get("unschedulable", False),
                    "ready": ready,
                    "last_seen_at": timezone.now(),
                },
            )
            seen.append(meta["name"])
        ClusterNode.objects.filter(cluster=cluster).exclude(name__in=seen).delete()
        for gpu_class in GpuClass.objects.all():
            total = ClusterNode.objects.filter(
                gpu_class=gpu_class, cluster__enabled=True
            ).aggregate(n=Sum("gpu_count"))["n"]
            if (total or 0) != gpu_class.capacity_gpus:
                gpu_class.capacity_gpus = total or 0
                gpu_class.save(update_fields=["capacity_gpus"])
    return len(seen)


# --- archive: logs and events outlive the objects -----------------------------------------


@dataclass
class ArchiveResult:
    stored: int = 0
    problems: list[str] = field(default_factory=list)


def _store_log(
    workload: Workload, run: reads.PodRun, capped: archive.CappedLog | None, note: str
) -> None:
    """One pod's log: its own row (found again by the pod's uid, so a second pass updates it
    with the newer end), and a new pod of the same replica is the replica's next attempt."""
    now = timezone.now()
    with transaction.atomic():
        # Two workers archiving the same workload at once would give two new pods the same
        # attempt number: the workload's row lock makes them take turns.
        list(Workload.objects.select_for_update().filter(pk=workload.pk).values_list("pk"))
        row = WorkloadLogArchive.objects.filter(workload=workload, pod_uid=run.uid).first()
        if row is None:
            last = WorkloadLogArchive.objects.filter(
                workload=workload, replica=run.replica
            ).aggregate(n=Max("attempt"))["n"]
            WorkloadLogArchive.objects.create(
                workload=workload,
                replica=run.replica,
                attempt=(last or 0) + 1,
                pod_name=run.name,
                pod_uid=run.uid,
                container=run.container,
                text=capped.text if capped else "",
                bytes=capped.bytes if capped else 0,
                truncated=capped.truncated if capped else False,
                note=note[:500],
                archived_at=now,
            )
        elif capped is not None:
            # The cluster's newer reading replaces the older one; a failed one keeps it.
            WorkloadLogArchive.objects.filter(pk=row.pk).update(
                text=capped.text,
                bytes=capped.bytes,
                truncated=capped.truncated,
                note="",
                archived_at=now,
            )


def _archive_runs(
    kube: Kube, workload: Workload, runs: Iterable[reads.PodRun], *, once: bool = False
) -> ArchiveResult:
    """Archive each pod's log. ``once``: a log the cluster cannot give is recorded as missing
    (with why) rather than reported, so that a pod on a lost node is not asked again on
    every pass; the archive before the delete still tries it again."""
    result = ArchiveResult()
    cap = settings.LOG_ARCHIVE_MAX_BYTES_PER_REPLICA
    asked = archive.lines_for_cap(cap)
    for run in runs:
        note = ""
        capped: archive.CappedLog | None
        try:
            capped = archive.keep_tail(
                reads.pod_run_log(workload, run, tail_lines=asked, kube=kube),
                max_bytes=cap,
                asked_lines=asked,
            )
        except ClusterObjectNotFound:
            continue  # the pod went between the list and the read: nothing left to keep
        except ClusterRefused as exc:
            # The container never started (image not pulled, …): no log, and the reason why.
            capped, note = None, f"no log: {exc.message}"
        except ClusterUnreachable as exc:
            if not once:
                result.problems.append(f"{run.name}: {exc}")
                continue
            capped, note = None, f"log unavailable: {exc}"
        _store_log(workload, run, capped, note)
        result.stored += 1
    return result


def _event_record(event: reads.ClusterEvent) -> dict[str, Any]:
    return {
        "time": event.time.isoformat() if event.time else None,
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "object": event.object,
        "count": event.count,
    }


def _store_events(workload: Workload, events: list[reads.ClusterEvent]) -> None:
    with transaction.atomic():
        row = WorkloadArchive.objects.select_for_update().filter(workload=workload).first()
        if row is None and not events:
            return
        if row is None:
            row = WorkloadArchive.objects.create(workload=workload)
        row.events = archive.merge_events(row.events or [], [_event_record(e) for e in events])
        row.archived_at = timezone.now()
        row.save(update_fields=["events", "archived_at"])


def workload_archive(*, workload: Workload, kube: Kube) -> ArchiveResult:
    """Keep the end of every pod's log (per replica and attempt, capped) and the workload's
    Kubernetes events. Idempotent: a second pass updates what the first one stored.

    Raises :class:`ClusterUnreachable` when the pods cannot be listed; a log or the events
    that cannot be read are in ``problems``, the rest is stored.
    """
    pods = reads.workload_pods(workload, kube=kube)
    result = _archive_runs(kube, workload, reads.pod_runs(pods))
    try:
        events = reads.workload_events(workload=workload, kube=kube, pods=pods)
    except ClusterError as exc:
        result.problems.append(f"events: {exc}")
    else:
        _store_events(workload, events)
    return result


def _archive_before_delete(kube: Kube, workload: Workload) -> bool:
    """Archive, and say whether the objects may be deleted now: yes when everything was kept,
    or when the cluster has not given the logs for LOG_ARCHIVE_RETRY_SECONDS (then the archive
    notes why they are missing); otherwise the delete waits for the next pass."""
    unreachable: ClusterUnreachable | None = None
    try:
        result = workload_archive(workload=workload, kube=kube)
    except ClusterUnreachable as exc:
        result, unreachable = ArchiveResult(problems=[str(exc)]), exc
    problems = result.problems
    if not problems:
        done = WorkloadArchive.objects.filter(workload=workload)
        done.exclude(failing_since=None).update(failing_since=None)
        if result.stored:
            done.exclude(note="").update(note="")  # the logs came after all
        return True
    now = timezone.now()
    row, _ = WorkloadArchive.objects.get_or_create(workload=workload)
    if row.failing_since is None:
        row.failing_since = now
        row.save(update_fields=["failing_since"])
    if now - row.failing_since < timedelta(seconds=settings.LOG_ARCHIVE_RETRY_SECONDS):
        log.warning("workload %s: logs not archived yet, delete waits: %s", workload.pk, problems)
        if unreachable is not None:
            raise unreachable
        return False
    # Waited long enough: the objects go, and the archive says why the logs are missing.
    row.note = f"logs could not be archived: {'; '.join(problems)}"[:500]
    row.failing_since = None
    row.save(update_fields=["note", "failing_since"])
    return True


def _archive_lost_pods(kube: Kube, workload: Workload, pods: list[dict[str, Any]]) -> None:
    """Pods being deleted or disrupted while the workload lives on (a preemption, a lost
    node): keep their logs now, before the next attempt's pod replaces them."""
    lost = [run for run in reads.pod_runs(pods) if run.lost]
    if not lost:
        return
    kept = set(
        WorkloadLogArchive.objects.filter(
            workload=workload, pod_uid__in=[r.uid for r in lost]
        ).values_list("pod_uid", flat=True)
    )
    try:
        _archive_runs(kube, workload, [r for r in lost if r.uid not in kept], once=True)
    except ClusterError as exc:
        log.warning("workload %s: logs of lost pods not archived: %s", workload.pk, exc)


def _archive_orphan_pods(kube: Kube, workload_id: int) -> None:
    """Before orphans go: the pods of a workload that still exists (its objects were never
    recorded, or it runs on another cluster now) are archived as they are, once."""
    workload = Workload.objects.select_related("team").filter(pk=workload_id).first()
    if workload is None:
        return
    try:
        _archive_runs(kube, workload, reads.workload_pod_runs(workload, kube=kube))
    except ClusterError as exc:
        log.warning("workload %s: logs of orphaned pods not archived: %s", workload_id, exc)


def log_archive_purge(*, now: datetime | None = None) -> int:
    """Delete archived logs and events older than LOG_ARCHIVE_RETENTION_DAYS; returns how
    many rows went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.LOG_ARCHIVE_RETENTION_DAYS)
    logs, _ = WorkloadLogArchive.objects.filter(archived_at__lt=cutoff).delete()
    # A workload whose delete still waits for its logs keeps its row (and its clock).
    events, _ = WorkloadArchive.objects.filter(
        archived_at__lt=cutoff, failing_since__isnull=True
    ).delete()
    return logs + events


# --- workloads: create and delete ---------------------------------------------------------


@dataclass
class ReconcileResult:
    created: int = 0
    deleted: int = 0
    orphans_deleted: int = 0
    endpoints_checked: int = 0
    unreachable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _record_refs(workload: Workload, applied: Iterable[Applied]) -> list[dict[str, str]]:
    refs = list(workload.k8s_objects or [])
    for item in applied:
        ref = item.ref()
        if ref not in refs:
            refs.append(ref)
    return refs


HOME_CLAIM_ATTEMPTS = 20


def home_volume_ensure(*, user_id: int, team: Team) -> str:
    """The name of a person's home volume in a team, chosen and stored on first use.

    Keyed by the user's id; a name already stored for someone else in the team (a volume
    named by the earlier username scheme) is skipped. Two reconciles racing for the same
    person both end with the one stored row (the unique constraints decide).
    """
    for attempt in range(HOME_CLAIM_ATTEMPTS):
        stored = (
            HomeVolume.objects.filter(user_id=user_id, team=team)
            .values_list("claim", flat=True)
            .first()
        )
        if stored:
            return stored
        try:
            with transaction.atomic():
                claim = m.home_claim_name(user_id, attempt)
                HomeVolume.objects.create(user_id=user_id, team=team, claim=claim)
            return claim
        except IntegrityError:
            continue  # taken in this team, or stored for this person meanwhile: read again
    raise m.ManifestError(f"No free home volume name for user {user_id} in {team.namespace}.")


def _ensure_objects(kube: Kube, workload: Workload) -> list[Applied]:
    spec = workload_spec(workload)
    applied: list[Applied] = []
    if workload.kind == wl.KIND_NOTEBOOK:
        claim = home_volume_ensure(user_id=workload.owner_id, team=workload.team)
        spec = replace(spec, home_claim=claim)
        applied.append(
            kube.apply(
                m.home_claim_manifest(
                    namespace=spec.namespace,
                    claim=spec.home_claim,
                    owner_id=workload.owner_id,
                    team_slug=spec.team_slug,
                    size=spec.home_size,
                )
            )
        )
        if kube.get("v1", "Secret", spec.notebook_token_secret, spec.namespace) is None:
            # The token exists only in the cluster; the portal reads it for the owner on demand.
            secret = m.notebook_token_secret(spec=spec, token=secrets.token_urlsafe(32))
            applied.append(kube.apply(secret, workload_id=workload.pk))
        else:
            applied.append(
                Applied("Secret", spec.namespace, spec.notebook_token_secret, False, False)
            )
    applied.extend(kube.apply_all(m.workload_manifests(spec), workload_id=workload.pk))
    # The home volume is not the workload's: it is kept, so it is not recorded for deletion.
    return [a for a in applied if a.kind != "PersistentVolumeClaim"]


def _delete_objects(kube: Kube, workload: Workload) -> int:
    deleted = 0
    refs = list(workload.k8s_objects or [])
    # Also sweep by label, in case a worker died between creating and recording a name.
    namespace = workload.team.namespace
    owned = OWNED_KINDS.get(workload.kind)
    for version, kind in WORKLOAD_KINDS:
        if owned is not None and kind not in owned:
            continue
        for obj in kube.list_owned(
            version, kind, namespace=namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ):
            ref = {"kind": kind, "namespace": namespace, "name": obj["metadata"]["name"]}
            if ref not in refs:
                refs.append(ref)
    for ref in refs:
        api_version = API_VERSIONS.get(ref["kind"])
        if api_version is None:
            continue
        try:
            if kube.delete(
                api_version, ref["kind"], ref["name"], ref["namespace"], workload_id=workload.pk
            ):
                deleted += 1
        except ForeignObjectError as exc:
            log.warning("%s", exc)
    return deleted


def workload_reconcile(*, workload_id: int) -> str:
    """Make the cluster match one workload's state. Safe to run twice or concurrently."""
    workload = (
        Workload.objects.select_related("team", "owner", "gpu_class", "image", "cluster")
        .filter(pk=workload_id)
        .first()
    )
    if workload is None:
        return "gone"
    cluster = cluster_of(workload)
    if cluster is None:
        return "no cluster"
    try:
        kube = kube_for(cluster)
        if workload.state in LIVE_STATES:
            try:
                applied = _ensure_objects(kube, workload)
            except (ResourceMappingError, m.ManifestError, ValueError, ClusterRefused) as exc:
                # A record the API server rejects (or a foreign object in the way) fails this
                # workload with the server's words; it never blocks the others. Ending it
                # releases its quota; what it got before the refusal is removed at once.
                failed = workload_transition(
                    workload=workload,
                    to_state=wl.FAILED,
                    reason=f"cannot be started: {exc}",
                    expected_from=workload.state,
                )
                try:
                    _delete_objects(kube, workload)
                except ClusterRefused as cleanup:
                    log.warning("workload %s: cleanup refused: %s", workload_id, cleanup)
                if failed:
                    taskqueue.SCHEDULING_CYCLE.send()  # its GPUs are free for the queue
                return "failed"
            with transaction.atomic():
                refs = _record_refs(workload, applied)
                changes: dict[str, Any] = {"k8s_objects": refs}
                if workload.cluster_id is None:
                    changes["cluster"] = cluster
                Workload.objects.filter(pk=workload.pk).update(**changes)
                if workload.last_reason == UNREACHABLE_REASON:
                    Workload.objects.filter(pk=workload.pk).update(
                        last_reason="cluster reachable again"
                    )
                if workload.state == wl.ADMITTED:
                    workload_transition(
                        workload=workload,
                        to_state=wl.STARTING,
                        reason="Kubernetes objects created; waiting for the pods.",
                        expected_from=wl.ADMITTED,
                    )
            return "ensured"
        if workload.state in GONE_STATES or workload.state == wl.PENDING:
            if not workload.k8s_objects and workload.state == wl.PENDING:
                return "nothing"
            # Logs and events outlive the objects: kept first, deleted after.
            if not _archive_before_delete(kube, workload):
                return "archiving"
            _delete_objects(kube, workload)
            Workload.objects.filter(pk=workload.pk).update(k8s_objects=[])
            return "deleted"
    except ClusterUnreachable as exc:
        log.warning("workload %s: %s", workload_id, exc)
        Workload.objects.filter(pk=workload.pk).update(last_reason=UNREACHABLE_REASON)
        raise
    return "nothing"


def _labelled_objects(kube: Kube, version: str, kind: str) -> list[dict[str, Any]]:
    """Objects of a kind carrying a workload label: one cluster-wide list call, except for
    Secrets, which are listed in team namespaces only (the portal's role may read no other
    namespace's Secrets): one call for the namespaces, then one per team namespace."""
    if kind != "Secret":
        return kube.list_owned(version, kind, label_selector=m.LABEL_WORKLOAD)
    found: list[dict[str, Any]] = []
    for ns in kube.list_owned("v1", "Namespace"):
        if ns["metadata"].get("deletionTimestamp"):
            continue  # going away, its binding perhaps already gone: nothing to sweep
        namespace = ns["metadata"]["name"]
        try:
            found.extend(
                kube.list_owned(version, kind, namespace=namespace, label_selector=m.LABEL_WORKLOAD)
            )
        except ClusterRefused as exc:
            if exc.status != 403:
                raise
            # The namespace lacks the portal's RoleBinding (the next team pass restores it):
            # the other namespaces are still swept.
            log.warning("orphan sweep skips %s: %s", namespace, exc)
    return found


def _reconcile_one(workload_id: int) -> str | Exception:
    try:
        return workload_reconcile(workload_id=workload_id)
    except (ClusterError, ValueError) as exc:
        return exc


def _reconcile_many(
    todo: list[tuple[int, str]],
) -> Iterator[tuple[int, str, str | Exception]]:
    """``workload_reconcile`` for each, ORCHESTRATION_RECONCILE_CONCURRENCY at a time.

    Each is idempotent and safe to run concurrently (object names come from the workload
    id; a second create is a 409 on our own object), so a worker killed at any point leaves
    at most one object per name, and the next pass finishes its work. Inside a transaction
    (the caller's rows are not visible to other connections) they run one after the other.
    The first unreachable cluster stops the pass: what was not started waits for the next.
    """
    workers = settings.ORCHESTRATION_RECONCILE_CONCURRENCY
    if workers <= 1 or len(todo) <= 1 or connection.in_atomic_block:
        for workload_id, counter in todo:
            outcome = _reconcile_one(workload_id)
            yield workload_id, counter, outcome
            if isinstance(outcome, ClusterUnreachable):
                return
        return

    def run(workload_id: int) -> str | Exception:
        try:
            return _reconcile_one(workload_id)
        finally:
            connection.close()  # this thread's own connection

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile") as pool:
        futures = [(pk, counter, pool.submit(run, pk)) for pk, counter in todo]
        for workload_id, counter, future in futures:
            outcome = future.result()
            yield workload_id, counter, outcome
            if isinstance(outcome, ClusterUnreachable):
                for _, _, rest in futures:
                    rest.cancel()
                return


def reconcile_pass(*, cluster: Cluster) -> ReconcileResult:
    """One pass over a cluster: live workloads have objects, others have none, orphans go.

    One list call per kind of object, whatever the number of workloads; only workloads whose
    objects are missing (or that were just admitted) cost further API calls.
    """
    result = ReconcileResult()
    kube = kube_for(cluster)
    listed: list[tuple[str, str, dict[str, Any], str]] = []
    try:
        for version, kind in WORKLOAD_KINDS:
            for obj in _labelled_objects(kube, version, kind):
                owner = (obj["metadata"].get("labels") or {}).get(m.LABEL_WORKLOAD, "")
                listed.append((version, kind, obj["metadata"], owner))
    except ClusterUnreachable as exc:
        result.unreachable.append(str(exc))
        return result
    existing = {(kind, meta.get("namespace") or "", meta["name"]) for _, kind, meta, _ in listed}

    # A sweep has no objects of its own; its trials do.
    on_cluster = Workload.objects.units().filter(cluster=cluster)
    if enabled_clusters().count() == 1:
        on_cluster = on_cluster | Workload.objects.units().filter(cluster__isnull=True)
    todo: list[tuple[int, str]] = []
    for pk, state, refs, kind in on_cluster.filter(state__in=LIVE_STATES).values_list(
        "pk", "state", "k8s_objects", "kind"
    ):
        present = bool(refs) and all(
            (r["kind"], r["namespace"], r["name"]) in existing for r in refs
        )
        # An endpoint's objects change while it runs (replicas, revisions): applied again on
        # every pass, so a lost reconcile task is made good (unchanged objects cost a read).
        if state == wl.ADMITTED or not present:
            todo.append((pk, "created"))
        elif kind == wl.KIND_INFERENCE:
            todo.append((pk, "endpoints_checked"))
    stale = on_cluster.filter(state__in=GONE_STATES).exclude(k8s_objects=[])
    todo.extend((pk, "deleted") for pk in stale.values_list("pk", flat=True))
    handled: set[str] = {str(pk) for pk, _ in todo}
    waiting: set[str] = set()
    for workload_id, counter, outcome in _reconcile_many(todo):
        if isinstance(outcome, ClusterUnreachable):
            result.unreachable.append(str(outcome))
            return result
        if isinstance(outcome, ClusterError | ValueError):
            # A record that cannot be reconciled is reported; the pass goes on for the others.
            log.warning("workload %s: %s", workload_id, outcome)
            result.errors.append(f"workload {workload_id}: {outcome}")
            continue
        if outcome in ("ensured", "deleted"):
            setattr(result, counter, getattr(result, counter) + 1)
        elif outcome == "archiving":
            waiting.add(str(workload_id))

    # Orphans: objects with our label whose workload is not live here (finished, gone, or
    # admitted to another cluster since). Those whose logs are still being archived wait.
    live_ids = {
        str(pk) for pk in on_cluster.filter(state__in=LIVE_STATES).values_list("pk", flat=True)
    }
    for version, kind, meta, owner in listed:
        if owner and owner not in live_ids and owner not in waiting and owner.isdigit():
            if owner not in handled:
                handled.add(owner)
                _archive_orphan_pods(kube, int(owner))
            try:
                if kube.delete(
                    version, kind, meta["name"], meta.get("namespace"), workload_id=int(owner)
                ):
                    result.orphans_deleted += 1
            except ClusterUnreachable as exc:
                result.unreachable.append(str(exc))
                return result
            except ClusterError as exc:
                # One object the server will not delete does not keep the others.
                result.errors.append(f"{kind} {meta.get('namespace')}/{meta['name']}: {exc}")
    return result


# --- status -------------------------------------------------------------------------------


@dataclass
class SyncResult:
    transitions: int = 0
    reasons: int = 0
    freed: int = 0
    rollouts: int = 0


def _group_by_workload(objects: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(m.LABEL_WORKLOAD)
        if owner and owner.isdigit():
            grouped[int(owner)].append(obj)
    return grouped


def observe(
    workload: Workload, jobs: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> st.Observation:
    if workload.kind == wl.KIND_NOTEBOOK:
        return st.observe_notebook(pods=pods)
    if workload.kind == wl.KIND_INFERENCE:
        return st.observe_endpoint(
            pods=pods, replicas=workload.replicas, running=workload.state == wl.RUNNING
        )
    if workload.kind == wl.KIND_TRAINING and workload.replicas > 1:
        # Retries of a gang are whole restarts through the queue; the events remember them.
        used = workload.events.filter(
            to_state=wl.PREEMPTED, reason__startswith=st.GANG_RETRY_PREFIX
        ).count()
        return st.observe_gang(
            jobs=jobs,
            pods=pods,
            replicas=workload.replicas,
            retries=workload.retries,
            retries_used=used,
            requeue=workload.requeue_on_preemption,
        )
    expected = 1
    if workload.kind == wl.KIND_SWEEP:
        expected = len(m.sweep_points(workload_spec(workload).sweep_grid)) or 1
    return st.observe_job_workload(jobs=jobs, pods=pods, expected_jobs=expected)


def status_sync_pass(*, cluster: Cluster) -> SyncResult:
    """Turn pod and Job phases into workload states, with the cluster's reasons and times.

    Two list calls per pass (pods and Jobs with our label), whatever the number of workloads.
    With watches running (:mod:`apps.orchestration.watch`) this is the slow safety net.
    """
    kube = kube_for(cluster)
    pods = kube.list_owned("v1", "Pod", label_selector=m.LABEL_WORKLOAD)
    jobs = kube.list_owned("batch/v1", "Job", label_selector=m.LABEL_WORKLOAD)
    return status_sync_observed(cluster=cluster, pods=pods, jobs=jobs)


def status_sync_observed(
    *,
    cluster: Cluster,
    pods: Iterable[dict[str, Any]],
    jobs: Iterable[dict[str, Any]],
    workload_ids: Iterable[int] | None = None,
    clean_up: Callable[[list[int]], None] | None = None,
) -> SyncResult:
    """The status update from objects already read (a list, or a watch's copy): every live
    workload of the cluster, or only ``workload_ids`` (those whose objects changed).

    Every state change is committed first, and a cycle queued as soon as one of them freed
    GPUs; only then are the ended workloads' objects archived and deleted, by ``clean_up``
    (the ids; the watch hands them to workers of its own) or here, several at once
    (:func:`gone_clean_up`). A cleanup lost on the way is the reconcile pass's to finish: it
    deletes the objects of every ended workload that still records some."""
    result = SyncResult()
    gone: list[int] = []
    kube = kube_for(cluster)
    pods_of = _group_by_workload(pods)
    jobs_of = _group_by_workload(jobs)
    single = enabled_clusters().count() == 1
    candidates = Workload.objects.units().filter(state__in=(wl.STARTING, wl.RUNNING))
    if workload_ids is not None:
        candidates = candidates.filter(pk__in=list(workload_ids))
    candidates = candidates.select_related("team", "owner", "gpu_class", "image")
    candidates = candidates.filter(cluster=cluster) | (
        candidates.filter(cluster__isnull=True) if single else candidates.none()
    )
    for workload in candidates:
        _archive_lost_pods(kube, workload, pods_of.get(workload.pk, []))
        seen = observe(workload, jobs_of.get(workload.pk, []), pods_of.get(workload.pk, []))
        if seen.state and seen.state != workload.state:
            extra: dict[str, Any] = {}
            if seen.started_at and workload.started_at is None:
                extra["started_at"] = seen.started_at
            if seen.finished_at:
                extra["finished_at"] = seen.finished_at
            if seen.exit_code is not None:
                extra["exit_code"] = seen.exit_code
            if seen.state == wl.PREEMPTED:
                extra["preempted_at"] = timezone.now()  # the requeue grace counts from here
            # One transaction each, not one for the batch: a transaction holding many
            # workloads' rows deadlocked with the scheduling cycle's (which updates waiting
            # and preempted rows in its own order) under bench/admission_bench.py.
            try:
                moved = workload_transition(
                    workload=workload,
                    to_state=seen.state,
                    reason=seen.reason,
                    expected_from=workload.state,
                    extra=extra,
                )
            except wl.TransitionError:
                moved = False
            if moved:
                result.transitions += 1
                if seen.state in GONE_STATES:
                    gone.append(workload.pk)
                    result.freed += 1
        elif seen.reason != workload.last_reason and seen.state is None:
            Workload.objects.filter(pk=workload.pk, state=workload.state).update(
                last_reason=seen.reason
            )
            result.reasons += 1
    if result.freed:
        # Finished, failed or preempted workloads freed GPUs: let the waiting ones in now,
        # before their objects are archived and deleted.
        taskqueue.SCHEDULING_CYCLE.send()
    if gone:
        (clean_up or gone_clean_up)(gone)
    result.rollouts = endpoint_rollouts_check(kube=kube, cluster=cluster, single=single)
    return result


def gone_clean_up(workload_ids: list[int]) -> int:
    """Archive and delete the objects of ended workloads, ORCHESTRATION_RECONCILE_CONCURRENCY
    at a time (each one idempotent, see :func:`workload_reconcile`); returns how many were
    deleted. One that fails is logged and left to the reconcile pass."""
    deleted = 0
    for workload_id, _, outcome in _reconcile_many([(pk, "deleted") for pk in workload_ids]):
        if isinstance(outcome, Exception):
            log.warning("workload %s: objects not deleted yet: %s", workload_id, outcome)
        elif outcome == "deleted":
            deleted += 1
    return deleted


def _parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def endpoint_rollouts_check(*, kube: Kube, cluster: Cluster, single: bool) -> int:
    """Endpoints rolling out a new revision: record the progress, mark it complete, or roll it
    back when the Deployment says its new replicas missed the progress deadline. One list
    call, and only while a rollout is in progress."""
    rolling = Workload.objects.filter(
        kind=wl.KIND_INFERENCE,
        state__in=(wl.STARTING, wl.RUNNING),
        params__endpoint__rollout__state="progressing",
    )
    rolling = rolling.filter(cluster=cluster) | (
        rolling.filter(cluster__isnull=True) if single else rolling.none()
    )
    if not rolling.exists():
        return 0
    deployments = {
        int(owner): d
        for owner, d in (
            ((d["metadata"].get("labels") or {}).get(m.LABEL_WORKLOAD, ""), d)
            for d in kube.list_owned("apps/v1", "Deployment", label_selector=m.LABEL_WORKLOAD)
        )
        if owner.isdigit()
    }
    changed = 0
    for workload in rolling:
        endpoint = (workload.params or {}).get("endpoint") or {}
        started = _parse_time((endpoint.get("rollout") or {}).get("started_at"))
        seen = st.observe_rollout(
            deployments.get(workload.pk),
            revision=int(endpoint.get("revision") or 1),
            revision_annotation=m.ANNOTATION_REVISION,
            elapsed_seconds=(timezone.now() - started).total_seconds() if started else 0.0,
            deadline_seconds=settings.ENDPOINT_PROGRESS_DEADLINE_SECONDS,
        )
        state = {st.ROLLOUT_FAILED: "failed"}.get(seen.state, seen.state)
        if endpoint_rollout_observed(
            workload=workload,
            state=state,
            message=seen.message,
            updated=seen.updated,
            ready=seen.ready,
        ):
            changed += 1
    return changed
